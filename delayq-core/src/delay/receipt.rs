//! What an ack presents (`Receipt`), and how acks go to the scripts: grouped by token (a
//! claim's deliveries share one, passed once), the answers put back in the callers' order.

use redis::ScriptInvocation;

use crate::id::MessageId;

/// An ack's `(id, fence token, dedup_for window ms)`: see
/// [`Delivery::receipt`](super::Delivery::receipt).
pub type Receipt = (MessageId, u64, u64);

/// The order an ack call answers in: answer `j` is for delivery `self.0[j]`.
pub(crate) struct AnswerOrder(Vec<usize>);

impl AnswerOrder {
    /// The answers in the deliveries' order; `None` when there are not one per delivery.
    pub(crate) fn restore(
        &self,
        answers: impl ExactSizeIterator<Item = bool>,
    ) -> Option<Vec<bool>> {
        if answers.len() != self.0.len() {
            return None;
        }
        let mut out = vec![false; self.0.len()];
        for (j, a) in answers.enumerate() {
            out[self.0[j]] = a;
        }
        Some(out)
    }
}

/// Acks' arguments (`ack_receipts` in prelude.lua): `n`, the number of tokens, each token with
/// how many of the ids follow under it, the ids grouped by token (a claim's deliveries share
/// one: passed once), then `(id, window)` of those sent with `dedup_for`.
pub(crate) fn with_receipts(
    mut inv: ScriptInvocation<'static>,
    deliveries: &[Receipt],
) -> (ScriptInvocation<'static>, AnswerOrder) {
    let mut order: Vec<usize> = (0..deliveries.len()).collect();
    order.sort_by_key(|&i| deliveries[i].1);
    let mut groups: Vec<(u64, usize)> = Vec::new();
    for &i in &order {
        let token = deliveries[i].1;
        match groups.last_mut() {
            Some((t, k)) if *t == token => *k += 1,
            _ => groups.push((token, 1)),
        }
    }
    inv.arg(deliveries.len()).arg(groups.len());
    for (token, k) in &groups {
        inv.arg(*token).arg(*k);
    }
    for &i in &order {
        inv.arg(deliveries[i].0.as_str());
    }
    for (id, _, window) in deliveries.iter().filter(|d| d.2 > 0) {
        inv.arg(id.as_str()).arg(*window);
    }
    (inv, AnswerOrder(order))
}
