import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { lowerBound, prefixRun } from "../plugin/sorted.ts";

// Paths from a small alphabet, so that prefixes, siblings sorting between a directory and its
// children (`a/b`, `a/b-x`, `a/b/c`) and characters around "/" (-, ., 0) all occur.
const path = fc.array(fc.stringMatching(/^[ab\-.0/é]{0,4}$/), { minLength: 1, maxLength: 4 }).map((parts) => parts.join("/"));

describe("sorted paths", () => {
  test("property: lowerBound is the first place not before the value; prefixRun is exactly the strings with the prefix", () => {
    fc.assert(
      fc.property(fc.uniqueArray(path, { maxLength: 40 }), path, (paths, probe) => {
        const sorted = [...paths].sort();
        const at = lowerBound(sorted, probe);
        expect(sorted.slice(0, at).every((p) => p < probe)).toBe(true);
        expect(sorted.slice(at).every((p) => !(p < probe))).toBe(true);
        for (const prefix of [probe, `${probe}/`]) {
          const { from, to } = prefixRun(sorted, prefix);
          expect(sorted.slice(from, to)).toEqual(sorted.filter((p) => p.startsWith(prefix)));
        }
      }),
      { numRuns: 2000 },
    );
  });

  test("a directory's run leaves out a sibling that sorts between it and its children", () => {
    const sorted = ["a/b", "a/b-x", "a/b-x/c", "a/b/c", "a/b/c/d", "a/c"];
    const { from, to } = prefixRun(sorted, "a/b/");
    expect(sorted.slice(from, to)).toEqual(["a/b/c", "a/b/c/d"]);
  });
});
