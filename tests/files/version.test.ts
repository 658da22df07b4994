import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { StoredVersion, textBytes, type VersionFields } from "../../plugin/files/version.ts";

const FIELDS: VersionFields = { path: "/w/a/AGENTS.md", dir: "/w/a", rel: "a/AGENTS.md", frontmatter: {}, root: false, sha256: "s", size: 0, truncated: false, mtimeMs: 0 };

/** Text as a context file has it: any Unicode (no lone surrogates: it was decoded from valid UTF-8), often long and repetitive. */
const fileText = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 3000 }),
  fc.tuple(fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 400 })).map(([line, times]) => `${line}\n`.repeat(times)),
);

describe("StoredVersion", () => {
  test("raw and body read back exactly what was read, packed or not", () => {
    fc.assert(
      fc.property(fileText, fc.nat(), (raw, at) => {
        const start = raw.length === 0 ? 0 : at % (raw.length + 1);
        const version = StoredVersion.read(FIELDS, raw, raw.slice(start));
        expect(version.raw).toBe(raw);
        expect(version.body).toBe(raw.slice(start));
        expect(Object.isFrozen(version)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  test("a derived version has a body of its own and its source's raw", () => {
    fc.assert(
      fc.property(fileText, fileText, (raw, body) => {
        const source = StoredVersion.read(FIELDS, raw, raw);
        const derived = StoredVersion.derived(source, body, "d");
        expect([derived.raw, derived.body, derived.sha256, derived.source]).toEqual([raw, body, "d", source]);
        expect(derived.path).toBe(FIELDS.path);
      }),
      { numRuns: 200 },
    );
  });

  test("markdown of some length is kept in well under its size; short or incompressible text as it is", () => {
    const markdown = Array.from({ length: 200 }, (_, i) => `- rule ${i}: run the package's tests before a commit, and keep the API stable\n`).join("");
    expect(textBytes(StoredVersion.read(FIELDS, markdown, markdown))).toBeLessThan(markdown.length / 4);
    const short = "# short\n";
    expect(textBytes(StoredVersion.read(FIELDS, short, short))).toBe(2 * short.length);
    let state = 7;
    const noise = Array.from({ length: 4000 }, () => String.fromCharCode(33 + ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 16) % 94)).join("");
    expect(textBytes(StoredVersion.read(FIELDS, noise, noise))).toBe(2 * noise.length);
  });
});
