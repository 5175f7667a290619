//! TEMPORARY shim until e23-metrics merges (replaced by the real parser).
use warmpath_protocol::replica_api::ReplicaLoad;
#[derive(Clone, Copy, Debug)]
pub enum MetricsDialect {
    Vllm,
    Sglang,
    Llamacpp,
}
#[derive(Debug, Default)]
pub struct EngineLoad {
    pub running: u32,
    pub waiting: u32,
}
impl EngineLoad {
    pub fn to_replica_load(&self, _cap: u64) -> ReplicaLoad {
        ReplicaLoad {
            running: self.running,
            waiting: self.waiting,
            ..Default::default()
        }
    }
}
pub fn parse_load(_d: MetricsDialect, _t: &str) -> Result<EngineLoad, String> {
    Err("shim".into())
}
