import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { relative, sep } from "node:path";
import type { FileVersion } from "../../plugin/files/contained.ts";
import { awaitedBy, byBase, type Awaiting } from "../../plugin/rules/apply.ts";
import { matchesPaths, readContract } from "../../plugin/rules/contract.ts";

/**
 * A file waiting for its `paths:` is found from a touched file by asking the directories above it
 * (awaitedBy over byBase). That must give exactly what checking every waiting file would.
 */
const waitingFile = (dir: string, paths: string[], base = dir): Awaiting => {
  const file = { path: `${dir}${dir.endsWith(sep) ? "" : sep}AGENTS.md`, dir, frontmatter: { paths } } as unknown as FileVersion;
  return { file, contract: readContract(file.frontmatter), base };
};

/** The brute force: every waiting file whose base holds the touched file and whose globs match it. */
const everyMatch = (waiting: readonly Awaiting[], touched: string, matched: ReadonlySet<string>) =>
  waiting.filter(({ file, contract, base }) => {
    const prefix = base.endsWith(sep) ? base : base + sep;
    return !matched.has(file.path) && touched.startsWith(prefix) && matchesPaths(contract, relative(base, touched).split(sep).join("/"));
  });

const segment = fc.constantFrom("a", "b", "src", "lib", "a.b", "node_modules");
const dirUnder = (root: string) => fc.array(segment, { maxLength: 4 }).map((parts) => (parts.length === 0 ? root : `${root === sep ? "" : root}${sep}${parts.join(sep)}`));
const globs = fc.array(fc.constantFrom("**/*.ts", "*.ts", "src/**", "**", "lib/*.md", "a/**/x.ts", "b/*"), { minLength: 1, maxLength: 2 });

describe("files waiting for a touch that matches their paths", () => {
  for (const worktree of ["/w", sep]) {
    test(`awaitedBy finds exactly the waiting files a touched file matches (worktree ${worktree})`, () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(dirUnder(worktree), globs, fc.boolean()), { maxLength: 8 }),
          dirUnder(worktree),
          fc.constantFrom("x.ts", "y.md", "x.md"),
          fc.nat(3),
          (specs, touchedDir, name, matchedCount) => {
            // A rule file's paths are relative to the worktree, whatever its directory.
            const waiting = specs.map(([dir, paths, rule]) => waitingFile(dir, paths, rule ? worktree : dir));
            const matched = new Set(waiting.slice(0, matchedCount).map((item) => item.file.path));
            const touched = `${touchedDir === sep ? "" : touchedDir}${sep}${name}`;
            const found = [...awaitedBy(byBase(waiting), touched, worktree, matched)];
            expect(new Set(found)).toEqual(new Set(everyMatch(waiting, touched, matched)));
          },
        ),
        { numRuns: 2000 },
      );
    });
  }

  test("a touched file outside the worktree's directories matches nothing there", () => {
    const waiting = [waitingFile("/w/a", ["**"]), waitingFile("/w", ["**"])];
    expect([...awaitedBy(byBase(waiting), "/other/a/x.ts", "/w", new Set())]).toEqual([]);
    expect([...awaitedBy(byBase(waiting), "/wx/a/x.ts", "/w", new Set())]).toEqual([]);
  });
});
