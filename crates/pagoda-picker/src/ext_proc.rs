//! The `ext_proc` gRPC service Envoy calls for every request: headers, then the buffered body;
//! the answer to the last of them carries the destination header.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderValue, HeaderValueOption,
};
use envoy_types::pb::envoy::r#type::v3::{HttpStatus, StatusCode};
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request::Request, processing_response::Response, BodyResponse, CommonResponse,
    HeaderMutation, HeadersResponse, ImmediateResponse, ProcessingRequest, ProcessingResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::pods::Pods;
use crate::scoring::{rank, Mode, Weights};
use crate::tokens::{render_path, token_ids, PrefixHasher};
use crate::DESTINATION_HEADER;

pub struct PickerService {
    pods: Arc<Pods>,
    hasher: PrefixHasher,
    mode: Mode,
    weights: Weights,
    turn: AtomicUsize,
}

impl PickerService {
    pub fn new(pods: Arc<Pods>, hasher: PrefixHasher, mode: Mode) -> Arc<Self> {
        Arc::new(Self {
            pods,
            hasher,
            mode,
            weights: Weights::default(),
            turn: AtomicUsize::new(0),
        })
    }

    pub fn pods(&self) -> &Arc<Pods> {
        &self.pods
    }

    /// The replicas for a request to `path` with `body`, best first: the first confirmed to
    /// accept connections, the rest the fallbacks Envoy retries on (before the first byte)
    /// if it fails. Empty when none is ready.
    async fn pick(&self, path: &str, body: &[u8]) -> Vec<SocketAddr> {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let hashes = match (self.mode, render_path(path)) {
            (Mode::PrefixAware, Some(render)) => self.prefix_hashes(render, body).await,
            _ => Vec::new(),
        };
        let matched = self.pods.matched(&hashes);
        let ranked = rank(
            &self.pods.snapshots(),
            &matched,
            hashes.len(),
            self.mode,
            self.weights,
            turn,
        );
        for (k, &i) in ranked.iter().enumerate() {
            let addr = self.pods.addr(i);
            // A replica killed since the last probe refuses at once: take the next best
            // instead of sending Envoy to a dead address.
            let connect = tokio::net::TcpStream::connect(addr);
            if matches!(
                tokio::time::timeout(Duration::from_millis(500), connect).await,
                Ok(Ok(_))
            ) {
                return ranked[k..].iter().map(|&i| self.pods.addr(i)).collect();
            }
            self.pods.mark_down(i);
        }
        Vec::new()
    }

    /// The request's block hashes, from token ids a ready replica renders for it.
    async fn prefix_hashes(&self, render: &str, body: &[u8]) -> Vec<u64> {
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
            return Vec::new();
        };
        let salt = json["cache_salt"].as_str().map(str::to_owned);
        let snapshots = self.pods.snapshots();
        let Some(i) = (0..snapshots.len()).find(|&i| snapshots[i].ready) else {
            return Vec::new();
        };
        let url = format!("http://{}{render}", self.pods.addr(i));
        let rendered = match self.pods.client().post(url).json(&json).send().await {
            Ok(answer) if answer.status().is_success() => answer.json().await.ok(),
            _ => None,
        };
        rendered
            .as_ref()
            .and_then(token_ids)
            .map(|tokens| self.hasher.hashes(&tokens, salt.as_deref()))
            .unwrap_or_default()
    }
}

/// The answer to the request's last message: route to `addrs` (`IP:PORT,IP:PORT,...`, the
/// first for the request, the others for retries), or 503 when nothing is ready.
fn routed(addrs: Vec<SocketAddr>, body_phase: bool) -> ProcessingResponse {
    if addrs.is_empty() {
        return ProcessingResponse {
            response: Some(Response::ImmediateResponse(ImmediateResponse {
                status: Some(HttpStatus {
                    code: StatusCode::ServiceUnavailable as i32,
                }),
                body: br#"{"error":{"message":"no replica is ready","type":"unavailable"}}"#
                    .to_vec(),
                ..Default::default()
            })),
            ..Default::default()
        };
    }
    let value: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    let common = CommonResponse {
        header_mutation: Some(HeaderMutation {
            set_headers: vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: DESTINATION_HEADER.into(),
                    raw_value: value.join(",").into_bytes(),
                    ..Default::default()
                }),
                append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let response = if body_phase {
        Response::RequestBody(BodyResponse {
            response: Some(common),
        })
    } else {
        Response::RequestHeaders(HeadersResponse {
            response: Some(common),
        })
    };
    ProcessingResponse {
        response: Some(response),
        ..Default::default()
    }
}

fn header(
    request: &envoy_types::pb::envoy::service::ext_proc::v3::HttpHeaders,
    name: &str,
) -> String {
    request
        .headers
        .as_ref()
        .into_iter()
        .flat_map(|map| &map.headers)
        .find(|h| h.key == name)
        .map(|h| {
            if h.raw_value.is_empty() {
                h.value.clone()
            } else {
                String::from_utf8_lossy(&h.raw_value).into_owned()
            }
        })
        .unwrap_or_default()
}

struct Service(Arc<PickerService>);

#[tonic::async_trait]
impl ExternalProcessor for Service {
    type ProcessStream = ReceiverStream<Result<ProcessingResponse, Status>>;

    async fn process(
        &self,
        request: tonic::Request<Streaming<ProcessingRequest>>,
    ) -> Result<tonic::Response<Self::ProcessStream>, Status> {
        let mut inbound = request.into_inner();
        let (sender, receiver) = mpsc::channel(4);
        let picker = self.0.clone();
        tokio::spawn(async move {
            let mut path = String::new();
            let mut body = Vec::new();
            while let Ok(Some(message)) = inbound.message().await {
                let answer = match message.request {
                    Some(Request::RequestHeaders(headers)) => {
                        path = header(&headers, ":path");
                        if let Some(query) = path.find('?') {
                            path.truncate(query);
                        }
                        if headers.end_of_stream {
                            routed(picker.pick(&path, &[]).await, false)
                        } else {
                            ProcessingResponse {
                                response: Some(
                                    Response::RequestHeaders(HeadersResponse::default()),
                                ),
                                ..Default::default()
                            }
                        }
                    }
                    Some(Request::RequestBody(chunk)) => {
                        body.extend_from_slice(&chunk.body);
                        if !chunk.end_of_stream {
                            continue;
                        }
                        routed(picker.pick(&path, &body).await, true)
                    }
                    // The processing mode sends nothing else; answer anything else unchanged.
                    _ => ProcessingResponse::default(),
                };
                if sender.send(Ok(answer)).await.is_err() {
                    break;
                }
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(receiver)))
    }
}

/// Serves the picker on `listener` until the task is dropped.
pub async fn serve(
    picker: Arc<PickerService>,
    listener: tokio::net::TcpListener,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(ExternalProcessorServer::new(Service(picker)))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await
}
