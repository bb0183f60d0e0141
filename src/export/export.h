/* export.h: a stored model written back out as a file; the whole surface of src/export.
 *
 * export.c rebuilds the GGUF a model was imported from, byte for byte, from its tensor blobs,
 * its MT_GGUF_META header and its MT_GGUF_GAPS bytes (the contract is in import.h); gen.c
 * writes a new GGUF for a model that came from safetensors or MLX. */
#ifndef MSTORE_EXPORT_H
#define MSTORE_EXPORT_H

#include <stdint.h>

#include "manifest/manifest.h"
#include "store/store.h"

typedef struct export_result {
    ms_digest digest;   /* sha256 of the file written */
    uint64_t nbytes;
    int identical;     /* 1 when the digest equals the imported file's */
} export_result;
/* Write model `name` as a GGUF file at `out_path` (atomically: temp file, fsync, rename).
 * Models imported from GGUF come back byte-identical. Others (llama, mistral, qwen2, qwen3 with
 * float tensors) get a GGUF llama.cpp loads: Q/K rows permuted back to GGUF's order for llama,
 * the vocabulary from a byte-level BPE tokenizer.json (else "no_vocab"). MS_ENOTFOUND,
 * MS_EUNSUPPORTED (MLX-quantized tensors, expert packs, other architectures), MS_EIO. */
int export_gguf(store *s, const model_name *name, const char *out_path, export_result *res);
/* One shard of a GGUF split by gguf-split, written again from model `name`: `header` (its
 * header_len bytes up to the data section, as the shard had it) followed by the tensors it
 * names, taken from the model's blobs, zeros between them, `file_size` bytes in all. For a
 * model pulled as shards, whose push sends them as they came (registry/ollama.c). */
/* 1 when export_gguf_shard gives GGUF `file` (`size` bytes; `what` names it in messages) back
 * from its header and tensors: every byte no tensor covers is zero, and fewer than the
 * alignment follow the last tensor; *header_len then the bytes up to its data section, to
 * keep. 0 when not; MS_EINVALID for a GGUF the reader refuses. */
int export_gguf_shard_fits(const uint8_t *file, uint64_t size, const char *what, uint64_t *header_len);
int export_gguf_shard(store *s, const model_name *name, const uint8_t *header, size_t header_len, uint64_t file_size,
                      const char *out_path, export_result *res);

#endif
