"""artifact_blobs.py: what lib_registry.sh's artifact builders share. An artifact is written as a
directory: each blob as DIR/<hex>, DIR/manifest.json, and DIR/blobs.txt listing the digests in
the order they were put (curl_push uploads them in that order)."""
import hashlib
import json
import os


class Artifact:
    def __init__(self, d):
        self.d = d
        self.digests = []
        os.makedirs(d, exist_ok=True)

    def put(self, b, mt, path=None, annotations=None):
        """Store bytes `b` as a blob; its descriptor with media type `mt`, and `path` as the
        org.cncf.model.filepath annotation (plus any other `annotations`)."""
        h = hashlib.sha256(b).hexdigest()
        with open(os.path.join(self.d, h), "wb") as f:
            f.write(b)
        self.digests.append("sha256:" + h)
        desc = {"mediaType": mt, "digest": "sha256:" + h, "size": len(b)}
        if path:
            desc["annotations"] = dict({"org.cncf.model.filepath": path}, **(annotations or {}))
        return desc

    def write(self, manifest):
        with open(os.path.join(self.d, "manifest.json"), "wb") as f:
            f.write(json.dumps(manifest).encode())
        with open(os.path.join(self.d, "blobs.txt"), "w") as f:
            f.write("\n".join(self.digests) + "\n")
