//! Streams that wrap a Pingora [`Stream`](pingora_core::protocols::Stream) to change how it
//! reads or writes ([`super::accept::deadline::DeadlineStream`], [`super::upstream::Coalesce`])
//! and leave everything else to the connection they wrap: [`connection_traits!`] writes
//! those delegating impls (identity, TLS, timing, proxy and socket digests, peek) once.

/// Implements Pingora's per-connection traits (`UniqueID`, `Ssl`, `GetTimingDigest`,
/// `GetProxyDigest`, `GetSocketDigest`, `Peek`) for `$wrapper` by delegating to its field
/// `inner: Stream`. `AsyncRead`, `AsyncWrite` and `Shutdown` are the wrapper's own.
macro_rules! connection_traits {
    ($wrapper:ty) => {
        impl pingora_core::protocols::UniqueID for $wrapper {
            fn id(&self) -> pingora_core::protocols::UniqueIDType {
                self.inner.id()
            }
        }

        impl pingora_core::protocols::Ssl for $wrapper {
            fn get_ssl(&self) -> Option<&pingora_core::protocols::tls::TlsRef> {
                self.inner.get_ssl()
            }
            fn get_ssl_digest(
                &self,
            ) -> Option<std::sync::Arc<pingora_core::protocols::tls::SslDigest>> {
                self.inner.get_ssl_digest()
            }
            fn selected_alpn_proto(&self) -> Option<pingora_core::protocols::ALPN> {
                self.inner.selected_alpn_proto()
            }
        }

        impl pingora_core::protocols::GetTimingDigest for $wrapper {
            fn get_timing_digest(&self) -> Vec<Option<pingora_core::protocols::TimingDigest>> {
                self.inner.get_timing_digest()
            }
            fn get_read_pending_time(&self) -> std::time::Duration {
                self.inner.get_read_pending_time()
            }
            fn get_write_pending_time(&self) -> std::time::Duration {
                self.inner.get_write_pending_time()
            }
        }

        impl pingora_core::protocols::GetProxyDigest for $wrapper {
            fn get_proxy_digest(
                &self,
            ) -> Option<std::sync::Arc<pingora_core::protocols::raw_connect::ProxyDigest>> {
                self.inner.get_proxy_digest()
            }
        }

        impl pingora_core::protocols::GetSocketDigest for $wrapper {
            fn get_socket_digest(
                &self,
            ) -> Option<std::sync::Arc<pingora_core::protocols::SocketDigest>> {
                self.inner.get_socket_digest()
            }
        }

        #[async_trait::async_trait]
        impl pingora_core::protocols::Peek for $wrapper {
            async fn try_peek(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
                self.inner.try_peek(buf).await
            }
        }
    };
}

pub(crate) use connection_traits;
