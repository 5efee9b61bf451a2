//! Every `nki` / `nl` / `nisa` name codegen may emit, with the keywords it passes and the NKI
//! documentation page the spelling was checked against (Neuron SDK 2.29–2.33, NKI 0.3–0.6).
//! A test holds generated code to this table.

/// One emitted name: `nisa.dma_copy`, `nl.affine_range`, `nl.add`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NkiName {
    /// The dotted name as emitted.
    pub name: &'static str,
    /// Keyword arguments codegen passes to it (empty for names that are not called with
    /// keywords).
    pub keywords: &'static [&'static str],
    /// The NKI documentation page for it.
    pub doc: &'static str,
}

/// `api!(name, page, [keywords])`.
macro_rules! api {
    ($name:literal, $page:literal, [$($kw:literal),*]) => {
        NkiName { name: $name, keywords: &[$($kw),*], doc: $page }
    };
}

/// The names, keywords and pages (see the module doc).
#[rustfmt::skip]
pub const EMITTED: &[NkiName] = &[
    api!("nki.jit", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html", []),
    api!("nl.ndarray", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.ndarray.html", ["dtype", "buffer"]),
    api!("nl.sbuf", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.ndarray.html", []),
    api!("nl.psum", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.ndarray.html", []),
    api!("nl.shared_hbm", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.ndarray.html", []),
    api!("nl.float32", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.bfloat16", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.float16", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.int32", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.uint16", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.uint32", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.affine_range", "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.language.affine_range.html", []),
    api!("nl.sequential_range", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html", []),
    api!("nisa.dma_copy", "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.dma_copy.html", ["dst", "src"]),
    api!("nisa.dma_transpose", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_transpose.html", ["dst", "src", "axes", "priority", "dge_mode", "oob_mode"]),
    api!("nisa.tensor_tensor", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.tensor_tensor.html", ["dst", "data1", "data2", "op", "engine"]),
    api!("nisa.tensor_scalar", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.tensor_scalar.html", ["dst", "data", "op0", "operand0", "op1", "operand1"]),
    api!("nisa.scalar_tensor_tensor", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.scalar_tensor_tensor.html", ["dst", "data", "op0", "operand0", "op1", "operand1", "reduce_op", "reduce_res"]),
    api!("nisa.activation", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.activation.html", ["dst", "op", "data", "bias", "scale"]),
    api!("nisa.activation_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.activation_reduce.html", ["dst", "op", "data", "bias", "scale", "reduce_op", "reduce_res"]),
    api!("nisa.tensor_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.tensor_reduce.html", ["dst", "op", "data", "axis", "negate", "keepdims"]),
    api!("nisa.tensor_copy", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.tensor_copy.html", ["dst", "src"]),
    api!("nisa.memset", "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.memset.html", ["dst", "value"]),
    api!("nisa.nc_matmul", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.isa.nc_matmul.html", ["dst", "stationary", "moving", "accumulate"]),
    api!("nisa.iota", "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.iota.html", ["dst", "pattern", "offset", "channel_multiplier"]),
    api!("nisa.range_select", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.range_select.html", ["dst", "on_true_tile", "comp_op0", "comp_op1", "bound0", "bound1", "reduce_cmd", "reduce_res", "reduce_op", "range_start", "on_false_value"]),
    api!("nisa.bn_stats", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.bn_stats.html", ["dst", "data"]),
    api!("nisa.bn_aggr", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.bn_aggr.html", ["dst", "data"]),
    api!("nisa.engine.gpsimd", "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.engine.html", []),
    api!("nisa.reduce_cmd.reset_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.range_select.html", []),
    api!("nisa.reciprocal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.reciprocal.html", ["dst", "data"]),
    api!("nisa.exponential", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.exponential.html", ["dst", "src", "max_value", "reduce_res", "reduce_cmd", "reduce_init"]),
    api!("nisa.reduce_cmd.load_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.exponential.html", []),
    api!("nisa.dge_mode.swdge", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_transpose.html", []),
    api!("nisa.dge_mode.hwdge", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_transpose.html", []),
    api!("nisa.dge_mode.none", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_transpose.html", []),
    api!("nisa.oob_mode.skip", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_transpose.html", []),
    api!("nisa.tensor_scalar_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_scalar_reduce.html", ["dst", "data", "op0", "operand0", "reduce_op", "reduce_res", "reduce_cmd", "reduce_init", "reduce_res_negate"]),
    api!("nisa.max8", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.max8.html", ["dst", "src"]),
    api!("nisa.nc_find_index8", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_find_index8.html", ["dst", "data", "vals"]),
    api!("nisa.nc_match_replace8", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_match_replace8.html", ["dst", "data", "vals", "imm", "dst_idx"]),
    api!("nisa.tensor_copy_predicated", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_copy_predicated.html", ["dst", "src", "predicate", "reverse_pred"]),
    api!("nisa.affine_select", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.affine_select.html", ["dst", "pattern", "channel_multiplier", "on_true_tile", "on_false_value", "cmp_op", "offset"]),
    api!("nisa.tensor_tensor_scan", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_tensor_scan.html", ["dst", "data0", "data1", "initial", "op0", "op1", "reverse0", "reverse1"]),
    api!("nisa.tensor_partition_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_partition_reduce.html", ["dst", "op", "data"]),
    api!("nisa.select_reduce", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.select_reduce.html", ["dst", "predicate", "on_true", "on_false", "reduce_res", "reduce_cmd", "reduce_op", "reverse_pred"]),
    api!("nisa.tensor_scalar_cumulative", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_scalar_cumulative.html", ["dst", "src", "op0", "op1", "imm0", "imm1", "reduce_cmd"]),
    api!("nisa.sequence_bounds", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.sequence_bounds.html", ["dst", "segment_ids"]),
    api!("nisa.nonzero_with_count", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nonzero_with_count.html", ["dst", "src", "index_offset", "padding_val"]),
    api!("nisa.topk", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.topk.html", ["val_dst", "idx_dst", "src", "n"]),
    api!("nisa.nc_stream_shuffle", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_stream_shuffle.html", ["dst", "src", "shuffle_mask"]),
    api!("nisa.rng", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.rng.html", ["dst", "engine"]),
    api!("nisa.rand2", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.rand2.html", ["dst", "min", "max"]),
    api!("nisa.rand_set_state", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.rand_set_state.html", ["src_seeds", "engine"]),
    api!("nisa.rand_get_state", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.rand_get_state.html", ["dst", "engine"]),
    api!("nisa.set_rng_seed", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.set_rng_seed.html", ["src_seeds"]),
    api!("nisa.dropout", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dropout.html", ["dst", "data", "prob"]),
    api!("nisa.local_gather", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.local_gather.html", ["dst", "src_buffer", "index", "num_elem_per_idx", "num_valid_indices"]),
    api!("nisa.nc_n_gather", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_n_gather.html", ["dst", "data", "indices"]),
    api!("nisa.nc_transpose", "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.nc_transpose.html", ["dst", "data"]),
    api!("nl.add", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.subtract", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.multiply", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.maximum", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.minimum", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.divide", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.equal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.not_equal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.greater", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.greater_equal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.less", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.less_equal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.copy", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.exp", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.rsqrt", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.sqrt", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.silu", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.square", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.relu", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.tanh", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.sigmoid", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.reciprocal", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.log", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.gelu_apprx_tanh", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.gelu", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.gelu_dx", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/nki.api.shared.html", []),
    api!("nl.silu_dx", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/nki/api/generated/nki.language.silu_dx.html", []),
    api!("ap", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/deep-dives/nki-aps.html", ["pattern", "offset"]),
    api!("nisa.register_alloc", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.register_alloc.html", ["x"]),
    api!("nisa.register_move", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.register_move.html", ["dst", "src"]),
    api!("nisa.register_load", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.register_load.html", ["dst", "src"]),
    api!("nisa.register_store", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.register_store.html", ["dst", "src"]),
    api!("nl.dynamic_range", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/deep-dives/nki-dynamic-loops.html", []),
    api!("nl.while_loop", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.while_loop.html", []),
    api!("nisa.dma_compute", "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.dma_compute.html", ["dst", "srcs", "reduce_op", "scales", "unique_indices", "oob_mode"]),
];
