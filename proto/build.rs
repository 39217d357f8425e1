//! Compiles `proto/engine.proto` with the pure-Rust `protox` parser, so no machine needs `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/engine.proto");
    let descriptors = protox::compile(["proto/engine.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
