//! The backend's one connection to the server: made on first use (TCP, or TLS for
//! rediss://) with its reads bounded ([`Capped`]), shared by the operations, dropped
//! when one fails so that the next makes it again; every operation runs under the time
//! limit.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, RedisError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::errors::{clip, state_error};
use super::tls::{handshake_error, NOT_TLS};
use super::{RedisBackend, REPLY_OVERHEAD};
use crate::state::capped::Capped;
use crate::state::StateError;

/// What a connection reads from: TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

impl RedisBackend {
    /// The connection, made when there is none.
    async fn connection(&self) -> Result<MultiplexedConnection, StateError> {
        let mut slot = self.connection.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.open().await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A new connection: TCP (TLS for rediss://, the `--state-ca-file` CA or the webpki
    /// roots) made here, so that
    /// what it reads passes through [`Capped`]: a reply larger than
    /// [`RedisBackend::max_reply`] cuts the connection before it is buffered whole.
    async fn open(&self) -> Result<MultiplexedConnection, StateError> {
        let info = self.client.get_connection_info();
        let unreachable = |err: std::io::Error| StateError::Unreachable(clip(&err.to_string()));
        let stream: Box<dyn Io> = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let tcp = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(unreachable)?;
                let _ = tcp.set_nodelay(true);
                Box::new(tcp)
            }
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(StateError::Garbage(
                        "rediss://...#insecure (no certificate check) is not supported; give the server a certificate its name verifies".into(),
                    ));
                }
                let tcp = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(unreachable)?;
                let _ = tcp.set_nodelay(true);
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|err| StateError::Garbage(clip(&err.to_string())))?;
                // Within the operation's bound, so a server that never answers a TLS
                // hello (a plain Redis waits for a newline) is reported as such rather
                // than as a plain timeout.
                let handshake = self.timeout.saturating_sub(self.timeout / 4);
                let tls = tokio::time::timeout(
                    handshake,
                    tokio_rustls::TlsConnector::from(Arc::clone(&self.tls)).connect(name, tcp),
                )
                .await
                .map_err(|_| {
                    StateError::Tls(format!(
                        "no TLS handshake answer within {} ms: {NOT_TLS}",
                        handshake.as_millis()
                    ))
                })?
                .map_err(handshake_error)?;
                Box::new(tls)
            }
            _ => {
                return Err(StateError::Garbage(
                    "--state must be a TCP address (redis:// or rediss://)".into(),
                ))
            }
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let (conn, driver) = MultiplexedConnection::new_with_config(
            info.redis_settings(),
            Capped::new(stream, self.max_reply()),
            config,
        )
        .await
        .map_err(|err| state_error(&err, self.timeout))?;
        // Ends when the connection is dropped (or breaks).
        tokio::spawn(driver);
        Ok(conn)
    }

    /// The most bytes one reply may take: the result cap plus [`REPLY_OVERHEAD`] (a
    /// record's other fields, an owner's list of ids).
    fn max_reply(&self) -> u64 {
        u64::try_from(self.max_result_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(REPLY_OVERHEAD)
    }

    /// Runs `op` on the connection within the time limit; a failure other than a
    /// script's own answer drops the connection, so the next operation makes a new one.
    pub(super) async fn run<T, F, Fut>(&self, op: F) -> Result<T, StateError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, RedisError>> + Send,
    {
        let attempt = async {
            let conn = self.connection().await?;
            op(conn)
                .await
                .map_err(|err| state_error(&err, self.timeout))
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(StateError::Timeout(self.timeout)),
        };
        match result {
            Err(StateError::TooLarge(size, _)) => {
                Err(StateError::TooLarge(size, self.max_result_bytes))
            }
            Err(err) => {
                *self.connection.lock().await = None;
                Err(err)
            }
            ok => ok,
        }
    }
}
