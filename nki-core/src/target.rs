//! Trainium generations and the per-NeuronCore limits that validation and the cost model use.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Trainium generation (one NeuronCore of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Target {
    /// Trn1 / Inf2, NeuronCore-v2.
    Trn1,
    /// Trn2, NeuronCore-v3.
    #[default]
    Trn2,
    /// Trn3, NeuronCore-v4.
    Trn3,
}

/// Partition dimension limit of every on-chip tile.
pub const PMAX: usize = 128;
/// fp32 elements per partition in one PSUM bank (2 KiB).
pub const PSUM_BANK_FMAX: usize = 512;
/// Bytes per partition in one PSUM bank.
pub const PSUM_BANK_BYTES: usize = 2048;
/// Number of PSUM banks.
pub const PSUM_BANKS: usize = 8;
/// Largest stationary (left) operand free size of `nc_matmul`.
pub const GEMM_STATIONARY_FMAX: usize = 128;
/// Largest moving (right) operand free size of `nc_matmul`.
pub const GEMM_MOVING_FMAX: usize = 512;

impl Target {
    /// SBUF bytes per partition.
    pub const fn sbuf_bytes_per_partition(self) -> usize {
        match self {
            Target::Trn1 => 192 * 1024,
            Target::Trn2 => 224 * 1024,
            Target::Trn3 => 256 * 1024,
        }
    }

    /// PSUM bytes per partition (8 banks of 2 KiB on every generation so far).
    pub const fn psum_bytes_per_partition(self) -> usize {
        PSUM_BANKS * PSUM_BANK_BYTES
    }

    /// Whether `nc_matmul` may write a bf16 PSUM tile (NeuronCore-v4 only).
    pub const fn matmul_bf16_output(self) -> bool {
        matches!(self, Target::Trn3)
    }

    /// The NeuronCore version it is built on (what `nki.isa` declarations are available for).
    pub const fn nc_version(self) -> nki_spec::NcVersion {
        match self {
            Target::Trn1 => nki_spec::NcVersion::Gen2,
            Target::Trn2 => nki_spec::NcVersion::Gen3,
            Target::Trn3 => nki_spec::NcVersion::Gen4,
        }
    }

    /// Physical NeuronCores per logical NeuronCore in the default configuration: 1 on Trn1,
    /// 2 on Trn2 and Trn3 (LNC=2, the Neuron compiler's default there). The cost model
    /// distributes the instances of a launch grid over them.
    pub const fn default_lnc(self) -> usize {
        match self {
            Target::Trn1 => 1,
            Target::Trn2 | Target::Trn3 => 2,
        }
    }

    /// Every generation, oldest first.
    pub const ALL: [Target; 3] = [Target::Trn1, Target::Trn2, Target::Trn3];

    /// Parses `trn1`, `trn2` or `trn3`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name used in messages and manifests: `trn1`, `trn2`, `trn3`.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Trn1 => "trn1",
            Target::Trn2 => "trn2",
            Target::Trn3 => "trn3",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
