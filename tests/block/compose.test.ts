import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compose } from "../../plugin/block/compose.ts";
import { recordingLogger } from "../files/helpers.ts";

describe("a block with no file", () => {
  test("is empty exactly when there is no notice and no deletion to tell, for every kind; else it tells each", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("system" as const, "delivery" as const, "compaction" as const),
        fc.array(fc.stringMatching(/^[a-z][a-z ]{0,20}$/), { maxLength: 2 }),
        fc.array(fc.stringMatching(/^[a-z]{1,8}\/AGENTS\.md$/), { maxLength: 2 }),
        fc.boolean(),
        async (kind, notices, deleted, updated) => {
          const extras = { notices, deleted, ...(updated ? { updated: new Set(["x"]) } : {}) };
          const { text, tokens, entries } = await compose(kind, [], 8000, recordingLogger(), extras);
          expect(entries).toEqual([]);
          if (notices.length === 0 && deleted.length === 0) {
            expect(text).toBe("");
            expect(tokens).toBe(0);
          } else {
            for (const said of [...notices, ...deleted]) expect(text).toContain(said);
            expect(tokens).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
