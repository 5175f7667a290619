//! Benchmark baseline: a bare Pingora HTTP proxy that forwards every request unchanged to
//! one upstream. `passthrough LISTEN_ADDR UPSTREAM_ADDR [THREADS] [one-send]`.
//!
//! With `one-send` it opens its upstream connections through the gateway's connector
//! (`gateway::UpstreamConnector`: each request header leaves together with its body), so the
//! benchmark can tell the gateway's I/O from its request logic.

use async_trait::async_trait;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::Server;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_proxy::{ProxyHttp, ProxyServiceBuilder, Session};
use std::sync::Arc;

/// The same allocator as the gateway binary, so the comparison measures the gateway's work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Passthrough {
    upstream: String,
    one_send: bool,
}

#[async_trait]
impl ProxyHttp for Passthrough {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut (),
    ) -> pingora_error::Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream.as_str(), false, String::new());
        if self.one_send {
            gateway::mark_upstream(&mut peer);
        }
        Ok(Box::new(peer))
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let listen = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let upstream = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:9100".into());
    let threads = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(1);
    let one_send = args.get(4).is_some_and(|a| a == "one-send");
    let conf = ServerConf {
        threads,
        upstream_keepalive_pool_size: 1024,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let app = Passthrough { upstream, one_send };
    if one_send {
        // The handler is never called: no client connection asks for a custom protocol.
        let mut proxy = ProxyServiceBuilder::new(&server.configuration, app)
            .custom(
                gateway::UpstreamConnector::new(),
                Arc::new(|_, _, _| Box::pin(async { None })),
            )
            .build();
        proxy.add_tcp(&listen);
        server.add_service(proxy);
    } else {
        let mut proxy = pingora_proxy::http_proxy_service(&server.configuration, app);
        proxy.add_tcp(&listen);
        server.add_service(proxy);
    }
    println!("listening on {listen}");
    server.run_forever()
}
