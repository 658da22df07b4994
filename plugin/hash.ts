import { nodeCrypto } from "./libraries.ts";

type Part = string | Uint8Array;

/**
 * SHA-256 of `parts` (strings as UTF-8), as hex. Bun's own hasher where the plugin runs (OpenCode):
 * node:crypto costs Bun's start-up 3-6 ms to load (it brings node's stream modules). On Node (the
 * explain CLI) node:crypto, loaded on first use.
 */
export function sha256Hex(...parts: Part[]): string {
  if (typeof Bun !== "undefined") {
    const hasher = new Bun.CryptoHasher("sha256");
    for (const part of parts) hasher.update(part);
    return hasher.digest("hex");
  }
  const hash = nodeCrypto().createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}
