//! The gRPC client of `monoflake serve`'s `monoflake.v1.Ids`, generated from the CLI's own
//! proto file with a pure-Rust protobuf compiler (protox): the soak talks to the service as
//! any client generated from that file would.

fn main() {
    const PROTO: &str = "../cli/proto/monoflake/v1/ids.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let files = match protox::compile([PROTO], ["../cli/proto"]) {
        Ok(files) => files,
        Err(e) => panic!("{PROTO}: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(files)
    {
        panic!("generating the gRPC client from {PROTO}: {e}");
    }
}
