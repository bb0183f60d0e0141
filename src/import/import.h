/* import.h: bringing models into the store; the whole surface of src/import.
 *
 * What an import writes (the contract the runtime and src/export read back):
 *
 * Tensor blobs (media type MT_TENSOR), one safetensors file per tensor, keyed by the canonical
 * (Hugging Face) name, which is also the manifest layer's `name`:
 *   - Float tensors keep their dtype (F32, F16, BF16) with the shape in HF order: [rows, cols]
 *     (GGUF's ne[] reversed).
 *   - GGUF block-quantized tensors keep their block bytes unchanged: dtype U8, shape
 *     [ne[n-1], ..., ne[1], row_nbytes]; __metadata__ "quant_type" is the ggml type name
 *     ("Q4_0", "Q6_K", ...) and "logical_shape" the element shape in HF order ("[4096, 4096]").
 *   - Every tensor imported from GGUF carries __metadata__ "gguf_name" (blk.0.attn_q.weight) so
 *     that export can rebuild the file without consulting the name table.
 *   - MLX-quantized tensors: {name} U32 packed, {name}.scale, {name}.bias; "quant_type"
 *     ("int4", "int8", ...) and "group_size".
 *   - MoE expert tensors of one layer are packed into one blob; the layer name is the prefix
 *     ("model.layers.3.mlp.experts"). In a pack, per-tensor metadata keys carry the tensor's
 *     name: "quant_type:<name>", "logical_shape:<name>", "gguf_name:<name>".
 *
 * Config blob (MT_CONFIG), JSON, Hugging Face config.json field names where one exists:
 *   architecture ("llama", "qwen3", ...), hidden_size, num_hidden_layers, num_attention_heads,
 *   num_key_value_heads, head_dim, intermediate_size, vocab_size, max_position_embeddings,
 *   rms_norm_eps, rope_theta, rope_scaling (object or null: {"rope_type": "linear"|"llama3",
 *   "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}),
 *   rope_interleaved (true when Q/K rows are in GGUF's order, i.e. rotate adjacent pairs; false
 *   for HF's rotate-halves), tie_word_embeddings, sliding_window, num_experts,
 *   num_experts_per_tok, bos_token_id, eos_token_id (int or array), tokenizer
 *   ({"kind": "spm"|"bpe", "pre": "..."} or null), quantization ({"<type>": n_tensors, ...}),
 *   source ({"format": "gguf"|"safetensors"|"mlx", "file": "<base name>", "digest": "sha256:..."});
 *   embedding models: pooling_type (GGUF's numbering: 1 mean, 2 cls, 3 last; from a GGUF's
 *   <arch>.pooling_type, or a directory's sentence-transformers Pooling module: modules.json's, else
 *   1_Pooling/config.json), layer_norm_eps and causal_attention (GGUF keys; a directory's stay in
 *   hf_config, config.json as it was, which the runtime reads for the encoders' GPT-2-style names).
 *
 * Other layers: MT_GGUF_META holds the GGUF file's bytes from offset 0 to the start of its data
 * section, verbatim (all metadata, the tokenizer arrays included, and the tensor infos);
 * MT_GGUF_GAPS the bytes between and after the GGUF's tensors when any is non-zero (in offset
 * order); MT_TOKENIZER tokenizer.json; MT_TOKENIZER_CONFIG tokenizer_config.json; MT_TEMPLATE the chat
 * template text; MT_GENERATION_CONFIG generation_config.json. */
#ifndef MSTORE_IMPORT_H
#define MSTORE_IMPORT_H

#include "manifest/manifest.h"
#include "store/store.h"

typedef struct import_opts {
    int quiet;   /* no progress display */
    /* Quantize float weights on import (quantize.c): "int4", "int8", "nvfp4", "mxfp8" (also
     * "int2", "int3", "int5", "int6", "mxfp4"); NULL keeps them as they are. group_size 0 means
     * the type's default (int4 32, int8 64; fixed for the fp types). */
    const char *quantize;
    int group_size;
    /* GGUF: the digest the whole file must hash to (a stored blob read as a file, as a create
     * from an uploaded GGUF does), NULL: none. The whole-file hash is computed anyway for the
     * config's source.digest, so checking it costs nothing; a mismatch is MS_EMISMATCH and the
     * caller's transaction is aborted before any blob of it lands. */
    const char *expect_digest;
} import_opts;

/* Import a Hugging Face directory of safetensors: unquantized, or MLX-quantized (config.json
 * "quantization"; mlx.c), or quantized on the way in (o->quantize). */
int import_hf_dir(store *s, const char *dir, const model_name *name, const import_opts *o, ms_digest digest_out);
/* import_hf_dir without a name: the blobs added to the caller's transaction `t`, *out the
 * manifest for the caller to extend and commit or abort (as import_gguf_manifest). `label` (NULL:
 * the directory) is what the config's source.file records: a pull assembles the directory under
 * tmp/, a name no one should see. */
int import_hf_manifest(manifest **out, store_txn *t, const char *dir, const char *label, const import_opts *o);
/* Import PATH, choosing the importer by what it is (directory, GGUF file). */
int import_path(store *s, const char *path, const model_name *name, const import_opts *o, ms_digest digest_out);

/* The GGUF import of `path` without a name: every blob that import_path writes for a GGUF file
 * added to the caller's transaction `t`, and *out the model's manifest, for the caller to extend
 * and commit (store_txn_commit) or abort. `label` (NULL: the path) is the file name the
 * config's "source" records and messages name. The config's source.digest is the sha256 of the
 * whole file as read. The blobs land under blobs/ at the caller's commit (or store_txn_flush);
 * after a failure the caller aborts `t`. MS_EINVALID naming the file and field, MS_EIO, MS_ENOMEM. */
int import_gguf_manifest(manifest **out, store_txn *t, const char *path, const char *label, const import_opts *o);
/* The GGUF import of a set split by llama.cpp's gguf-split (gguf_split.c), as one model: `paths`
 * the n shards in order (split.no 0..n-1), `labels` their names in messages, `label` the file
 * name the config records. The set is checked (each shard's split.no, one split.count = n, one
 * split.tensors.count = the tensors of all) and merged into a GGUF under the store's tmp/, then
 * imported as import_gguf_manifest imports a file: the config's source.digest is the merged
 * file's, which export gives back. import_gguf_manifest of a first shard (NAME-00001-of-0000N.gguf)
 * finds the others beside it and comes here. MS_EINVALID naming the shard and key. */
int import_gguf_split_manifest(manifest **out, store_txn *t, const char *const *paths, const char *const *labels,
                               size_t n, const char *label, const import_opts *o);

#endif
