//! One handle on Redis, a single server or a Cluster. Both kinds multiplex every caller on
//! one connection per node and are cheap to clone; both reconnect on their own. With
//! `rediss://` every connection is TLS (rustls), verified against `state.ca_file`.

use crate::config::StateConfig;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, IntoConnectionInfo, RedisResult, ScriptInvocation};
use std::time::Duration;

/// A connection to the configured Redis.
#[derive(Clone)]
pub(crate) enum Conn {
    /// `state.url`.
    Single(ConnectionManager),
    /// `state.cluster`.
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `cfg`'s Redis; every call on the result gives up after `timeout_ms`.
    pub(crate) async fn connect(cfg: &StateConfig) -> RedisResult<Self> {
        let response = Duration::from_millis(cfg.timeout_ms);
        // Opening a TCP connection may take longer than a command; it never holds a request.
        let connect = response.max(Duration::from_millis(500));
        let password = cfg.password()?;
        let certs = cfg.tls_certificates()?;
        if let Some(url) = &cfg.url {
            let mut info = url.as_str().into_connection_info()?;
            if let Some(p) = &password {
                let settings = info.redis_settings().clone().set_password(p);
                info = info.set_redis_settings(settings);
            }
            let client = match certs {
                Some(certs) => redis::Client::build_with_tls(info, certs)?,
                None => redis::Client::open(info)?,
            };
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(connect))
                .set_response_timeout(Some(response))
                .set_number_of_retries(1);
            return Ok(Self::Single(
                ConnectionManager::new_with_config(client, config).await?,
            ));
        }
        let mut builder = ClusterClientBuilder::new(cfg.cluster.clone());
        if let Some(p) = password {
            builder = builder.password(p);
        }
        if let Some(certs) = certs {
            builder = builder.certs(certs);
        }
        let client = builder
            .connection_timeout(connect)
            .response_timeout(response)
            .retries(1)
            .build()?;
        Ok(Self::Cluster(client.get_async_connection().await?))
    }

    /// Runs a script (EVALSHA, loading it once after a Redis restart); a Cluster routes it
    /// by its first key.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        match self {
            Self::Single(c) => call.invoke_async(&mut c.clone()).await,
            Self::Cluster(c) => call.invoke_async(&mut c.clone()).await,
        }
    }

    /// Runs one command.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            Self::Single(c) => cmd.query_async(&mut c.clone()).await,
            Self::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
    }

    /// Runs a pipeline (atomic when built so; a Cluster needs all its keys in one slot).
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> RedisResult<T> {
        match self {
            Self::Single(c) => pipe.query_async(&mut c.clone()).await,
            Self::Cluster(c) => pipe.query_async(&mut c.clone()).await,
        }
    }
}
