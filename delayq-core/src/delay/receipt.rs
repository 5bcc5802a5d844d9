//! What an ack presents (`Receipt`), and how acks go to the scripts: grouped by token (a
//! claim's deliveries share one, passed once), the answers put back in the callers' order.

use redis::ScriptInvocation;

use crate::id::MessageId;

/// An ack's `(id, fence token, dedup_for window ms)`: see
/// [`Delivery::receipt`](super::Delivery::receipt).
pub type Receipt = (MessageId, u64, u64);

/// The order an ack call answers in: answer `j` is for delivery `order[j]`; a delivery given
/// twice in one call is sent once, and its later copies are answered `false` (stale: it was
/// acked once, as a second ack after the first is), so that it is counted once.
pub(crate) struct AnswerOrder {
    order: Vec<usize>,
    deliveries: usize,
}

impl AnswerOrder {
    /// The answers in the deliveries' order; `None` when there are not one per delivery sent.
    pub(crate) fn restore(
        &self,
        answers: impl ExactSizeIterator<Item = bool>,
    ) -> Option<Vec<bool>> {
        if answers.len() != self.order.len() {
            return None;
        }
        let mut out = vec![false; self.deliveries];
        for (j, a) in answers.enumerate() {
            out[self.order[j]] = a;
        }
        Some(out)
    }
}

/// Acks' arguments (`ack_receipts` in prelude.lua): `n`, the number of tokens, each token with
/// how many of the ids follow under it, the ids grouped by token (a claim's deliveries share
/// one: passed once), then `(id, window)` of those sent with `dedup_for`, and `(id, -(window + 1))` of
/// flow steps' (their ends are noted for their flows; a window of 0 reserves nothing). A delivery given twice goes once (see
/// [`AnswerOrder`]).
pub(crate) fn with_receipts(
    mut inv: ScriptInvocation<'static>,
    deliveries: &[Receipt],
) -> (ScriptInvocation<'static>, AnswerOrder) {
    let key = |i: usize| (deliveries[i].1, deliveries[i].0.as_str());
    let mut order: Vec<usize> = (0..deliveries.len()).collect();
    // Stable: of a delivery given twice, the first copy stays.
    order.sort_by(|&a, &b| key(a).cmp(&key(b)));
    order.dedup_by(|later, kept| key(*later) == key(*kept));
    let mut groups: Vec<(u64, usize)> = Vec::new();
    for &i in &order {
        let token = deliveries[i].1;
        match groups.last_mut() {
            Some((t, k)) if *t == token => *k += 1,
            _ => groups.push((token, 1)),
        }
    }
    inv.arg(order.len()).arg(groups.len());
    for (token, k) in &groups {
        inv.arg(*token).arg(*k);
    }
    for &i in &order {
        inv.arg(deliveries[i].0.as_str());
    }
    for &i in &order {
        let (id, _, window) = &deliveries[i];
        if crate::id::is_step_id(id.as_str()) {
            // A flow step's: its end is noted for its flow, in the ack's own call, and its id
            // reserved for its window, in one pair: the window as -(window + 1).
            inv.arg(id.as_str()).arg(-(i128::from(*window)) - 1);
        } else if *window > 0 {
            inv.arg(id.as_str()).arg(*window);
        }
    }
    let order = AnswerOrder {
        order,
        deliveries: deliveries.len(),
    };
    (inv, order)
}
