/* hash.c: sha256 over OpenSSL's EVP interface, and digest strings. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "blob/blob.h"

struct blob_hash {
    EVP_MD_CTX *ctx;
};

blob_hash *blob_hash_new(void)
{
    blob_hash *h = calloc(1, sizeof *h);

    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        blob_hash_free(h);
        return NULL;
    }
    return h;
}

void blob_hash_update(blob_hash *h, const void *buf, size_t len)
{
    if (len)
        EVP_DigestUpdate(h->ctx, buf, len);
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

    EVP_DigestFinal_ex(h->ctx, md, &n);
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
