//! Benchmark upstream: answers every chat/completion request with the same small OpenAI
//! reply (as server-sent events, all in one body, when the request has `"stream":true`),
//! and serves the replica control endpoints (info, byte-level tokenizer, load, an empty KV
//! snapshot) so the gateway can register it.
//! `fixed_upstream LISTEN_ADDR [THREADS] [TOKENIZER_SPEC_JSON]`: the tokenizer it publishes is
//! the byte-level fixture unless a spec file (as served by a replica at
//! `/v1/replica/tokenizer`) is given.

use async_trait::async_trait;
use http::Response;
use pingora_core::apps::http_app::{HttpServer, ServeHttp};
use pingora_core::protocols::http::ServerSession;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::Server;
use pingora_core::services::listening::Service;
use warmpath_core::{BlockSize, CheckpointId, Epoch, KvStreamMessage, SeqNo};
use warmpath_protocol::replica_api::{ReplicaInfo, ReplicaLoad};

struct Fixed {
    info: Vec<u8>,
    tokenizer: Vec<u8>,
    load: Vec<u8>,
    snapshot: Vec<u8>,
}

const CHAT_REPLY: &[u8] = br#"{"id":"chatcmpl-fixed","object":"chat.completion","created":0,"model":"fixed","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}}"#;

const STREAM_REPLY: &[u8] = b"data: {\"id\":\"chatcmpl-fixed\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fixed\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"chatcmpl-fixed\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fixed\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1,\"total_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n\
data: [DONE]\n\n";

#[async_trait]
impl ServeHttp for Fixed {
    async fn response(&self, http: &mut ServerSession) -> Response<Vec<u8>> {
        let mut request = Vec::new();
        while let Ok(Some(chunk)) = http.read_request_body().await {
            request.extend_from_slice(&chunk);
        }
        let stream = memchr::memmem::find(&request, b"\"stream\":true").is_some();
        let (body, kind) = match http.req_header().uri.path() {
            "/v1/replica/info" => (self.info.clone(), "application/json"),
            "/v1/replica/tokenizer" => (self.tokenizer.clone(), "application/json"),
            "/v1/replica/load" => (self.load.clone(), "application/json"),
            "/v1/kv/events" => (self.snapshot.clone(), "application/json"),
            _ if stream => (STREAM_REPLY.to_vec(), "text/event-stream"),
            _ => (CHAT_REPLY.to_vec(), "application/json"),
        };
        Response::builder()
            .status(200)
            .header("content-type", kind)
            .header("content-length", body.len().to_string())
            .body(body)
            .unwrap_or_else(|_| Response::new(Vec::new()))
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let listen = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:9100".into());
    let threads = args.get(2).and_then(|t| t.parse().ok()).unwrap_or(1);
    let tokenizer = match args.get(3) {
        Some(path) => std::fs::read(path)?,
        None => serde_json::to_vec(&warmpath_text::bytelevel::chatml_bpe_spec())?,
    };
    let info = ReplicaInfo {
        model: "fixed".into(),
        checkpoint: CheckpointId::new("fixed@1"),
        block_size: BlockSize(16),
        hash_scheme: warmpath_core::SCHEME_VERSION,
        capacity_blocks: 1 << 20,
        max_context: 1 << 20,
        region: None,
        device: "cpu".into(),
        role: Default::default(),
        kv_store_region: None,
    };
    let mut snapshot = serde_json::to_vec(&KvStreamMessage::Snapshot {
        epoch: Epoch(1),
        seq: SeqNo(0),
        hashes: Vec::new(),
    })?;
    snapshot.push(b'\n');
    let app = Fixed {
        info: serde_json::to_vec(&info)?,
        tokenizer,
        load: serde_json::to_vec(&ReplicaLoad::default())?,
        snapshot,
    };
    let conf = ServerConf {
        threads,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut svc = Service::new("fixed-upstream".to_string(), HttpServer::new_app(app));
    svc.add_tcp(&listen);
    server.add_service(svc);
    println!("listening on {listen}");
    server.run_forever()
}
