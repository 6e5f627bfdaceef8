//! Compiles the kernel halves of the stage collector (`src/bpf/stages.bpf.c`), of the noise
//! contributors' timer (`src/bpf/contrib.bpf.c`) and of the hard-IRQ counter
//! (`src/bpf/irqcount.bpf.c`) into BPF objects with BTF (`-g`, for CO-RE
//! relocations), embedded into the crate with `include_bytes!`.
//!
//! Needs `clang` (Debian: `clang`); the libbpf headers come from `libbpf-sys`, the UAPI
//! headers from the C library's development files. `scripts/test.sh` installs them.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CLANG");
    for name in ["stages", "contrib", "irqcount"] {
        compile(name);
    }
}

fn compile(name: &str) {
    let src = format!("src/bpf/{name}.bpf.c");
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join(format!("{name}.bpf.o"));
    let libbpf_include = std::env::var("DEP_BPF_INCLUDE").expect("libbpf-sys exports its headers");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // The kernel's name for the architecture (bpf_tracing.h) and Debian's multiarch dir.
    let (target_arch, multiarch) = match arch.as_str() {
        "x86_64" => ("x86", "x86_64-linux-gnu"),
        "aarch64" => ("arm64", "aarch64-linux-gnu"),
        "riscv64" => ("riscv", "riscv64-linux-gnu"),
        "powerpc64" => ("powerpc", "powerpc64le-linux-gnu"),
        "s390x" => ("s390", "s390x-linux-gnu"),
        other => (other, other),
    };
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-g", "-O2", "-target", "bpf", "-Wall", "-Werror"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-I{libbpf_include}"))
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", &src, "-o"])
        .arg(&obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed to compile {src} ({s})"),
        Err(e) => panic!(
            "cannot run {clang} to compile {src}: {e}. Install clang (Debian: apt-get install \
             clang libelf-dev zlib1g-dev pkg-config; scripts/test.sh does)"
        ),
    }
}
