//! Benchmark baseline: a bare Pingora HTTP proxy that forwards every request unchanged to
//! one upstream. `passthrough LISTEN_ADDR UPSTREAM_ADDR [THREADS]`.

use async_trait::async_trait;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::Server;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_proxy::{ProxyHttp, Session};

/// The same allocator as the gateway binary, so the comparison measures the gateway's work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Passthrough {
    upstream: String,
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
        Ok(Box::new(HttpPeer::new(
            self.upstream.as_str(),
            false,
            String::new(),
        )))
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
    let conf = ServerConf {
        threads,
        upstream_keepalive_pool_size: 1024,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy =
        pingora_proxy::http_proxy_service(&server.configuration, Passthrough { upstream });
    proxy.add_tcp(&listen);
    server.add_service(proxy);
    println!("listening on {listen}");
    server.run_forever()
}
