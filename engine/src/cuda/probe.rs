//! Checks, before anything is loaded, that the CUDA driver, NVRTC and cuBLAS libraries can
//! be opened and that the GPU exists, so a machine without them gets an error, not a panic
//! (cudarc's dynamically loaded bindings panic on first use of a missing library).
#![allow(unsafe_code)] // dlopen probes; each block states its invariants.

use crate::error::EngineError;

/// A library the backend opens at run time.
struct Lib {
    what: &'static str,
    present: fn() -> bool,
}

fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library's candidate names; no symbol is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}
fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
fn cublas_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

const LIBS: [Lib; 3] = [
    Lib {
        what: "libcuda.so (NVIDIA driver)",
        present: driver_present,
    },
    Lib {
        what: "libnvrtc.so.12 (CUDA NVRTC)",
        present: nvrtc_present,
    },
    Lib {
        what: "libcublas.so.12 (cuBLAS)",
        present: cublas_present,
    },
];

/// The error for libraries that could not be opened.
pub(crate) fn unavailable(missing: &[&str]) -> EngineError {
    EngineError::Device(format!(
        "CUDA is not available: cannot load {}. Install the NVIDIA driver and the CUDA 12 \
         runtime libraries (NVRTC, cuBLAS) and make them visible through LD_LIBRARY_PATH, \
         or use --device cpu",
        missing.join(", ")
    ))
}

/// Whether NVRTC can be opened (kernels can be compiled, even without a GPU).
pub fn nvrtc_available() -> bool {
    nvrtc_present()
}

/// Checks the libraries, then that GPU `ordinal` exists. Returns the number of GPUs.
pub fn probe(ordinal: usize) -> Result<usize, EngineError> {
    let missing: Vec<&str> = LIBS
        .iter()
        .filter(|l| !(l.present)())
        .map(|l| l.what)
        .collect();
    if !missing.is_empty() {
        return Err(unavailable(&missing));
    }
    let count = cudarc::driver::CudaContext::device_count().map_err(|e| {
        EngineError::Device(format!(
            "CUDA is not available: the driver reports {e}; use --device cpu"
        ))
    })?;
    let count = usize::try_from(count).unwrap_or(0);
    if ordinal >= count {
        return Err(EngineError::Device(format!(
            "no GPU cuda:{ordinal}: the driver sees {count} device(s); use --device cpu"
        )));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_unavailable_message_names_what_is_missing_and_the_fallback() {
        let e = unavailable(&["libcuda.so (NVIDIA driver)"]).to_string();
        assert!(e.starts_with("device: CUDA is not available"), "{e}");
        assert!(
            e.contains("libcuda.so") && e.contains("--device cpu"),
            "{e}"
        );
    }

    #[test]
    fn cuda_probe_reports_a_clear_error_or_a_device() {
        match probe(0) {
            Ok(n) => assert!(n >= 1),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("CUDA is not available") || e.contains("no GPU cuda:0"),
                    "{e}"
                );
                assert!(e.contains("--device cpu"), "{e}");
            }
        }
        // An ordinal no machine has is always an error, never a panic.
        let e = probe(1 << 20).unwrap_err().to_string();
        assert!(e.contains("--device cpu"), "{e}");
    }
}
