//! Clients of `monoflake serve`, as other languages' would be: HTTP/1.1 with keep-alive
//! (`GET /v1/ids?count=N`, IDs as decimal strings in JSON) and gRPC (`monoflake.v1.Ids/Next`,
//! generated from the CLI's proto file).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::Channel;

#[allow(clippy::all, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/monoflake.v1.rs"));
}

use pb::NextRequest;
use pb::ids_client::IdsClient;

/// The longest a request may take before the client gives up on it. Longer than any pause
/// the nemesis makes, so the answers a paused server gives when it resumes are seen.
pub const REQUEST_BOUND: Duration = Duration::from_secs(30);

/// Why a request got no IDs.
#[derive(Debug)]
pub enum Refused {
    /// The server answered: 503 / UNAVAILABLE and its message.
    Server(String),
    /// No answer: the connection failed or the request timed out (reconnect).
    Connection(String),
}

/// One HTTP/1.1 connection.
pub struct Http {
    sender: SendRequest<Empty<Bytes>>,
    host: String,
}

impl Http {
    pub async fn connect(addr: &str) -> Result<Http, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake {addr}: {e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Http {
            sender,
            host: addr.to_owned(),
        })
    }

    /// `GET /v1/ids?count=N`.
    pub async fn ids(&mut self, count: u64) -> Result<Vec<u64>, Refused> {
        let request = hyper::Request::get(format!("/v1/ids?count={count}"))
            .header(hyper::header::HOST, &self.host)
            .body(Empty::<Bytes>::new())
            .map_err(|e| Refused::Connection(e.to_string()))?;
        let answer = tokio::time::timeout(REQUEST_BOUND, async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        })
        .await;
        let (status, body) = match answer {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(Refused::Connection(e.to_string())),
            Err(_) => return Err(Refused::Connection("timed out".into())),
        };
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(Refused::Server(format!("{status} {text}")));
        }
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Refused::Server(format!("not JSON ({e}): {text}")))?;
        value["ids"]
            .as_array()
            .ok_or_else(|| Refused::Server(format!("no ids in {text}")))?
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| Refused::Server(format!("not a decimal string: {v}")))
            })
            .collect()
    }
}

/// One gRPC channel.
pub struct Grpc {
    client: IdsClient<Channel>,
}

impl Grpc {
    pub async fn connect(addr: &str) -> Result<Grpc, String> {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(5))
            .timeout(REQUEST_BOUND)
            .connect()
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        Ok(Grpc {
            client: IdsClient::new(channel),
        })
    }

    /// `Next{count}`.
    pub async fn ids(&mut self, count: u64) -> Result<Vec<u64>, Refused> {
        match self.client.next(NextRequest { count }).await {
            Ok(response) => Ok(response.into_inner().ids),
            Err(status) if status.code() == tonic::Code::Unavailable => {
                // A server's refusal carries its message; a transport failure says so.
                if status.message().contains("transport") || status.message().is_empty() {
                    Err(Refused::Connection(status.to_string()))
                } else {
                    Err(Refused::Server(status.message().to_owned()))
                }
            }
            Err(status) => Err(Refused::Connection(status.to_string())),
        }
    }
}
