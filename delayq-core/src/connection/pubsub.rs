//! Connections for wake-ups over pub/sub: a plain client on a single server or the current
//! Sentinel primary, a RESP3 cluster connection for sharded subscriptions on a cluster.

use redis::cluster_async::ClusterConnection;
use redis::RedisError;

use super::backend::{cluster_builder, Source};
use super::conn::RedisConn;

impl RedisConn {
    /// A client for a plain pub/sub connection: the server, or the current Sentinel primary.
    /// `None` on a cluster, whose wake-ups go through [`cluster_subscriber`](Self::cluster_subscriber).
    pub async fn pubsub_client(&self) -> Option<redis::RedisResult<redis::Client>> {
        match &*self.shared.source {
            Source::Single(client) => Some(Ok(client.clone())),
            Source::Sentinel(sentinel) => Some(sentinel.lock().await.async_get_client().await),
            Source::Cluster { .. } => None,
        }
    }

    /// On a cluster: a RESP3 cluster connection of its own whose pushes (sharded messages,
    /// and re-subscriptions after a failover or slot move) go to `pushes`. It subscribes
    /// again by itself wherever the slots move.
    pub async fn cluster_subscriber(
        &self,
        pushes: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> Option<redis::RedisResult<ClusterConnection>> {
        let Source::Cluster { nodes, .. } = &*self.shared.source else {
            return None;
        };
        let builder = match cluster_builder(&self.shared.url, nodes) {
            Ok(builder) => builder,
            Err(e) => {
                return Some(Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "cluster seed nodes",
                    e.to_string(),
                ))))
            }
        };
        let client = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(pushes)
            .build();
        Some(match client {
            Ok(client) => client.get_async_connection().await,
            Err(e) => Err(e),
        })
    }
}
