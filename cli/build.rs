//! Generates the gRPC code of `monoflake serve` from `proto/` with a pure-Rust protobuf
//! compiler (protox), so building needs nothing but cargo: no `protoc`. Also writes the
//! encoded descriptor set the server's reflection service answers from
//! (`$OUT_DIR/monoflake_v1.fds`), with the `.proto`'s comments (grpcurl's `describe` shows
//! them).

fn main() {
    #[cfg(feature = "server")]
    grpc();
}

#[cfg(feature = "server")]
fn grpc() {
    const PROTO: &str = "proto/monoflake/v1/ids.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let mut compiler = match protox::Compiler::new(["proto"]) {
        Ok(compiler) => compiler,
        Err(e) => panic!("proto/: {e}"),
    };
    compiler.include_source_info(true).include_imports(true);
    if let Err(e) = compiler.open_file(PROTO) {
        panic!("{PROTO}: {e}");
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let fds = out.join("monoflake_v1.fds");
    if let Err(e) = std::fs::write(&fds, compiler.encode_file_descriptor_set()) {
        panic!("writing {}: {e}", fds.display());
    }
    if let Err(e) = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())
    {
        panic!("generating the gRPC code from {PROTO}: {e}");
    }
}
