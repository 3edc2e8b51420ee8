//! Generates the gRPC code of `monoflake serve` from `proto/` with a pure-Rust protobuf
//! compiler (protox), so building needs nothing but cargo: no `protoc`.

fn main() {
    #[cfg(feature = "server")]
    grpc();
}

#[cfg(feature = "server")]
fn grpc() {
    const PROTO: &str = "proto/monoflake/v1/ids.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let files = match protox::compile([PROTO], ["proto"]) {
        Ok(files) => files,
        Err(e) => panic!("{PROTO}: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(files)
    {
        panic!("generating the gRPC code from {PROTO}: {e}");
    }
}
