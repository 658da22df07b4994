import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import fc from "fast-check";
import { sha256Hex } from "../plugin/hash.ts";

describe("sha256Hex", () => {
  test("is node:crypto's SHA-256 of the parts end to end, strings as UTF-8 (property)", () => {
    const part = fc.oneof(fc.string({ unit: "binary", maxLength: 200 }), fc.uint8Array({ maxLength: 200 }));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 5 }), (parts) => {
        const reference = createHash("sha256");
        for (const piece of parts) reference.update(piece);
        expect(sha256Hex(...parts)).toBe(reference.digest("hex"));
      }),
      { numRuns: 2000 },
    );
  });
});
