//! How far a simulated run has got: the event loop reports it every few thousand events to a
//! [`ProgressSink`] (the command's progress bar or periodic log line; nothing in tests).

/// A point in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SimProgress {
    /// Requests finished (completed or failed).
    pub done: usize,
    /// Requests in the workload.
    pub total: usize,
    /// Virtual time reached, ms.
    pub virtual_ms: f64,
}

/// Receives progress reports; implementations throttle their own output.
pub trait ProgressSink {
    /// Called every [`REPORT_EVERY_EVENTS`] events and once at the end.
    fn update(&mut self, p: &SimProgress);
}

/// Events between two reports (cheap enough to read a clock each time).
pub const REPORT_EVERY_EVENTS: u64 = 4096;

/// A sink that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn update(&mut self, _: &SimProgress) {}
}
