/* hash.c: sha256, on the CPU's SHA extensions (sha256.c) where it has them, else OpenSSL's
 * EVP interface; and digest strings. */
#include <assert.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "blob/blob_int.h"

struct blob_hash {
    EVP_MD_CTX *ctx;   /* NULL: the state is `sha` */
    blob_sha sha;
};

blob_hash *blob_hash_new_impl(const char *impl)
{
    const blob_sha_impl *si = NULL;
    blob_hash *h;

    if (!impl)
        si = blob__sha_best();
    else if (strcmp(impl, "openssl") != 0 && !(si = blob__sha_impl(impl))) {
        ms_err(MS_EINVALID, "sha256 implementation '%s': unknown, or not on this CPU", impl);
        return NULL;
    }
    if (!(h = calloc(1, sizeof *h))) {
        ms_err(MS_ENOMEM, "out of memory");
        return NULL;
    }
    if (si) {
        blob__sha_init(&h->sha, si);
        return h;
    }
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        blob_hash_free(h);
        ms_err(MS_ENOMEM, "out of memory for a sha256 context");
        return NULL;
    }
    return h;
}

blob_hash *blob_hash_new(void)
{
    return blob_hash_new_impl(NULL);
}

int blob_hash_update2_fused(void)
{
    return blob__sha_best() != NULL;
}

void blob_hash_update(blob_hash *h, const void *buf, size_t len)
{
    if (!len)
        return;
    if (h->ctx)
        EVP_DigestUpdate(h->ctx, buf, len);
    else
        blob__sha_update(&h->sha, buf, len);
}

void blob_hash_update2(blob_hash *a, blob_hash *b, const void *buf, size_t len)
{
    if (!a->ctx && !b->ctx && a->sha.impl == b->sha.impl) {
        blob__sha_update2(&a->sha, &b->sha, buf, len);
        return;
    }
    blob_hash_update(a, buf, len);
    blob_hash_update(b, buf, len);
}

static void to_digest(ms_digest out, const unsigned char md[32])
{
    static const char hex[] = "0123456789abcdef";

    memcpy(out, "sha256:", 7);
    for (int i = 0; i < 32; i++) {
        out[7 + 2 * i] = hex[md[i] >> 4];
        out[8 + 2 * i] = hex[md[i] & 15];
    }
    out[BLOB_DIGEST_LEN] = '\0';
}

void blob_hash_final(ms_digest digest_out, blob_hash *h)
{
    unsigned char md[32];
    unsigned int n = 0;

    if (h->ctx)
        EVP_DigestFinal_ex(h->ctx, md, &n);
    else
        blob__sha_final(md, &h->sha);
    to_digest(digest_out, md);
    blob_hash_free(h);
}

void blob_hash_free(blob_hash *h)
{
    if (!h)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void blob_hash_thread_end(void)
{
    OPENSSL_thread_stop();
}

void blob_digest_buf(ms_digest digest_out, const void *buf, size_t len)
{
    unsigned char md[32];
    unsigned int n = 0;

    EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
    to_digest(digest_out, md);
}

int blob_digest_valid(const char *d)
{
    if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != BLOB_DIGEST_LEN)
        return 0;
    for (int i = 7; i < BLOB_DIGEST_LEN; i++)
        if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
            return 0;
    return 1;
}

const char *blob_digest_hex(const char *digest)
{
    assert(blob_digest_valid(digest));
    return digest + sizeof "sha256:" - 1;
}
