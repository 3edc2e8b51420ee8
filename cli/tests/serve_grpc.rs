//! `monoflake serve --grpc-listen`: the `monoflake.v1.Ids` service through a tonic client.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::collections::HashSet;

use server::{Server, runtime};
use tonic::Code;
use tonic::transport::Channel;

#[allow(clippy::all, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/monoflake.v1.rs"));
}

use pb::ids_client::IdsClient;
use pb::{DecodeRequest, NextRequest};

async fn client(addr: &str) -> IdsClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    IdsClient::new(channel)
}

#[test]
fn next_and_decode_over_grpc() {
    let dir = common::TempDir::new("grpc");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--layout",
        "discord",
        "--node",
        "33",
        "--grpc-listen",
        "127.0.0.1:0",
        "--max-count",
        "5000",
    ]);
    let addr = s.grpc.clone().unwrap();
    runtime().block_on(async {
        let mut c = client(&addr).await;
        let ids = c
            .next(NextRequest { count: 5000 })
            .await
            .unwrap()
            .into_inner()
            .ids;
        assert_eq!(ids.len(), 5000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        // 0 means 1.
        let one = c
            .next(NextRequest { count: 0 })
            .await
            .unwrap()
            .into_inner()
            .ids;
        assert_eq!(one.len(), 1);
        assert!(one[0] > ids[4999]);
        let too_many = c.next(NextRequest { count: 5001 }).await.unwrap_err();
        assert_eq!(too_many.code(), Code::InvalidArgument);
        assert_eq!(
            too_many.message(),
            "count 5001 is out of range: from 1 to 5000 (--max-count)"
        );
        // Discord's documented example.
        let d = c
            .decode(DecodeRequest {
                id: 175928847299117063,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(d.layout, "discord");
        assert_eq!(d.unix_ms, 1462015105796);
        assert_eq!(d.time, "2016-04-30T11:18:25.796Z");
        assert_eq!(d.sequence, 7);
        assert_eq!(
            d.fields
                .iter()
                .map(|f| (f.name.as_str(), f.value))
                .collect::<Vec<_>>(),
            [("worker", 1), ("process", 0)]
        );
        // The IDs issued carry the node held.
        let mine = c
            .decode(DecodeRequest { id: one[0] })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(mine.node, 33);
    });
    let m = server::get(&server::agent(), &s.url("/metrics"), &[]);
    assert!(
        m.body
            .contains("monoflake_request_duration_seconds_count{endpoint=\"grpc Next\"} 3\n"),
        "{}",
        m.body
    );
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn sigterm_with_an_open_grpc_connection_still_exits_0_and_releases() {
    let dir = common::TempDir::new("grpc-stop");
    let state = dir.path().to_str().unwrap();
    let s = Server::start(&[
        "--state-dir",
        state,
        "--node",
        "4",
        "--grpc-listen",
        "127.0.0.1:0",
    ]);
    let addr = s.grpc.clone().unwrap();
    let rt = runtime();
    // A client keeps its HTTP/2 connection open (and its runtime running) across the stop.
    let mut c = rt.block_on(client(&addr));
    let before = rt
        .block_on(c.next(NextRequest { count: 10 }))
        .unwrap()
        .into_inner()
        .ids;
    let (status, log) = s.stop();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("node 4 released"), "{log}");
    // The open connection gets no more IDs; the node is free for the next server.
    assert!(rt.block_on(c.next(NextRequest { count: 1 })).is_err());
    let next = Server::start(&["--state-dir", state, "--node", "4"]);
    let after = server::ids_of(&server::get(&server::agent(), &next.url("/v1/id"), &[]));
    assert!(after[0] > before[9]);
}

#[test]
fn grpc_health_follows_readiness_and_needs_no_token() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let dir = common::TempDir::new("grpc-health");
    let token = dir.path().join("token");
    std::fs::write(&token, "health-token-0123456789\n").unwrap();
    let state = dir.path().join("state");
    let s = Server::start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--grpc-listen",
        "127.0.0.1:0",
        "--token-file",
        token.to_str().unwrap(),
        "--reclaim-after",
        "3600",
    ]);
    let addr = s.grpc.clone().unwrap();
    let rt = runtime();
    let channel = rt.block_on(async {
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
    let mut health = HealthClient::new(channel);
    let mut status = |service: &str| {
        let request = HealthCheckRequest {
            service: service.to_owned(),
        };
        rt.block_on(health.check(request))
            .map(|r| r.into_inner().status)
    };
    assert_eq!(status("").unwrap(), ServingStatus::Serving as i32);
    assert_eq!(
        status("monoflake.v1.Ids").unwrap(),
        ServingStatus::Serving as i32
    );
    assert_eq!(
        status("no.such.Service").unwrap_err().code(),
        Code::NotFound
    );
    // The lease is lost (the state directory removed): health turns NOT_SERVING, as /readyz.
    common::delete_under_holders(&state);
    let start = std::time::Instant::now();
    while status("monoflake.v1.Ids").unwrap() != ServingStatus::NotServing as i32 {
        assert!(
            start.elapsed() < server::GUARD,
            "health never turned NOT_SERVING"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status("").unwrap(), ServingStatus::NotServing as i32);
    assert_eq!(
        server::get(&server::agent(), &s.url("/readyz"), &[]).status,
        503
    );
    drop(s);
}

#[test]
fn grpc_clients_in_parallel_never_share_an_id() {
    let dir = common::TempDir::new("grpc-unique");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--grpc-listen",
        "127.0.0.1:0",
    ]);
    let addr = s.grpc.clone().unwrap();
    let all: Vec<Vec<u64>> = runtime().block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = client(&addr).await;
                let mut mine = Vec::new();
                for _ in 0..20 {
                    mine.extend(
                        c.next(NextRequest { count: 1000 })
                            .await
                            .unwrap()
                            .into_inner()
                            .ids,
                    );
                }
                mine
            }));
        }
        // Twitter IDs fit in 63 bits: one with the sign bit set is refused, not decoded.
        let mut c = client(&addr).await;
        let signed = c.decode(DecodeRequest { id: u64::MAX }).await.unwrap_err();
        assert_eq!(signed.code(), Code::InvalidArgument);
        assert!(
            signed
                .message()
                .starts_with("cannot decode 18446744073709551615 under the twitter layout: "),
            "{}",
            signed.message()
        );
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let mut seen = HashSet::new();
    for run in &all {
        assert!(run.windows(2).all(|w| w[0] < w[1]));
        assert!(run.iter().all(|id| seen.insert(*id)), "a duplicate ID");
    }
    assert_eq!(seen.len(), 8 * 20 * 1000);
}

#[test]
fn grpc_over_tls_with_a_token() {
    let dir = common::TempDir::new("grpc-tls");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key, token) = (
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
        dir.path().join("token"),
    );
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    std::fs::write(&token, "grpc-token-0123456789\n").unwrap();
    let state = dir.path().join("state");
    let s = Server::start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--grpc-listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    let port = s
        .grpc
        .clone()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let pem = certified.cert.pem();
    runtime().block_on(async {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&pem))
            .domain_name("localhost");
        let channel = Channel::from_shared(format!("https://localhost:{port}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = IdsClient::new(channel);
        // No token: UNAUTHENTICATED, no ID.
        let refused = c.next(NextRequest { count: 5 }).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated);
        // A wrong token: the same.
        let mut wrong = tonic::Request::new(NextRequest { count: 5 });
        wrong.metadata_mut().insert(
            "authorization",
            "Bearer grpc-token-012345678X".parse().unwrap(),
        );
        assert_eq!(
            c.next(wrong).await.unwrap_err().code(),
            Code::Unauthenticated
        );
        // The token: IDs.
        let mut good = tonic::Request::new(NextRequest { count: 5 });
        good.metadata_mut().insert(
            "authorization",
            "Bearer grpc-token-0123456789".parse().unwrap(),
        );
        let ids = c.next(good).await.unwrap().into_inner().ids;
        assert_eq!(ids.len(), 5);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    });
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn the_grpc_listener_answers_plain_http_with_json_and_counts_it() {
    let dir = common::TempDir::new("grpc-plain");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--grpc-listen",
        "127.0.0.1:0",
    ]);
    let grpc = s.grpc.clone().unwrap();
    let a = server::agent();
    let answer = server::get(&a, &format!("http://{grpc}/v1/id"), &[]);
    assert_eq!(answer.status, 404, "{answer:?}");
    assert_eq!(answer.content_type, "application/json");
    assert!(
        answer
            .error()
            .starts_with("no such path: /v1/id; this is the gRPC listener")
    );
    // An unknown method, over gRPC: UNIMPLEMENTED with a reason.
    runtime().block_on(async {
        let channel = Channel::from_shared(format!("http://{grpc}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        assert!(
            health
                .check(tonic_health::pb::HealthCheckRequest::default())
                .await
                .is_ok()
        );
        let mut raw = tonic::client::Grpc::new(channel);
        for (path, reason) in [
            // A service this listener does not have: the listener's own answer.
            (
                "/monoflake.v1.Other/Next",
                "no such method: /monoflake.v1.Other/Next",
            ),
            // A method the service does not have: tonic's.
            ("/monoflake.v1.Ids/Nope", ""),
        ] {
            raw.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<NextRequest, pb::NextResponse>::default();
            let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
            let e = raw
                .unary(tonic::Request::new(NextRequest { count: 1 }), path, codec)
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::Unimplemented);
            assert!(e.message().starts_with(reason), "{e}");
        }
    });
    let m = server::get(&a, &s.url("/metrics"), &[]).body;
    // The plain 404 and the two unknown methods, counted where every answer is.
    assert!(
        m.contains("monoflake_responses_total{code=\"404\"} 3\n"),
        "{m}"
    );
}

/// One reflection exchange over a stream: every request sent, every answer read until the
/// stream ends — `Ok((answers, the status it ended with, if not OK))` — or the call's
/// refusal.
macro_rules! reflect {
    ($version:ident, $channel:expr, $token:expr, $requests:expr) => {{
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::{
            ServerReflectionRequest, server_reflection_request::MessageRequest,
        };
        let requests: Vec<ServerReflectionRequest> = $requests
            .into_iter()
            .map(|m: MessageRequest| ServerReflectionRequest {
                host: String::new(),
                message_request: Some(m),
            })
            .collect();
        let mut request = tonic::Request::new(tonic::codegen::tokio_stream::iter(requests));
        if let Some(token) = $token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        match ServerReflectionClient::new($channel)
            .server_reflection_info(request)
            .await
        {
            Err(status) => Err(status),
            Ok(answers) => {
                let mut answers = answers.into_inner();
                let mut all = Vec::new();
                loop {
                    match answers.message().await {
                        Ok(Some(answer)) => all.push(answer.message_response.expect("an answer")),
                        Ok(None) => break Ok((all, None)),
                        Err(status) => break Ok((all, Some(status))),
                    }
                }
            }
        }
    }};
}

#[test]
fn reflection_lists_every_service_and_describes_ids() {
    use prost::Message;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest as V1Request;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse as V1Response;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;

    let dir = common::TempDir::new("grpc-reflection");
    let token = "reflection-token-0123456789";
    let s = Server::try_start_with_env(
        &[
            "--state-dir",
            dir.path().to_str().unwrap(),
            "--grpc-listen",
            "127.0.0.1:0",
        ],
        &[("MONOFLAKE_TOKEN", token)],
    )
    .unwrap();
    let addr = s.grpc.clone().unwrap();
    let expected = [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "monoflake.v1.Ids",
    ];
    runtime().block_on(async {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        // v1: the services, then the file that defines monoflake.v1.Ids, as grpcurl asks.
        let answers = reflect!(
            v1,
            channel.clone(),
            Some(token),
            [
                V1Request::ListServices(String::new()),
                V1Request::FileContainingSymbol("monoflake.v1.Ids".to_owned()),
                V1Request::FileContainingSymbol("monoflake.v1.Nope".to_owned()),
            ]
        )
        .unwrap();
        // An unknown symbol ends the stream NOT_FOUND, after the answers before it.
        let (answers, end) = answers;
        assert_eq!(end.map(|s| s.code()), Some(Code::NotFound));
        assert_eq!(answers.len(), 2);
        let V1Response::ListServicesResponse(list) = &answers[0] else {
            panic!("{:?}", answers[0]);
        };
        let mut names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, expected);
        let V1Response::FileDescriptorResponse(files) = &answers[1] else {
            panic!("{:?}", answers[1]);
        };
        let file =
            prost_types::FileDescriptorProto::decode(files.file_descriptor_proto[0].as_slice())
                .unwrap();
        assert_eq!(file.name(), "monoflake/v1/ids.proto");
        assert_eq!(file.package(), "monoflake.v1");
        let methods: Vec<&str> = file.service[0].method.iter().map(|m| m.name()).collect();
        assert_eq!(methods, ["Next", "Decode"]);
        // The comments come along (grpcurl's `describe` shows them).
        assert!(file.source_code_info.is_some());

        // v1alpha (older grpcurl and tools) lists the same.
        let answers = reflect!(
            v1alpha,
            channel.clone(),
            Some(token),
            [AlphaRequest::ListServices(String::new())]
        )
        .unwrap()
        .0;
        let AlphaResponse::ListServicesResponse(list) = &answers[0] else {
            panic!("{:?}", answers[0]);
        };
        let mut names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, expected);

        // Without the token, reflection is refused like the API it describes.
        let refused = reflect!(
            v1,
            channel.clone(),
            None::<&str>,
            [V1Request::ListServices(String::new())]
        )
        .unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated);
    });
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}
