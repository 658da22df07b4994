import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { FileVersion } from "../../plugin/files/contained.ts";
import { StoredVersion } from "../../plugin/files/version.ts";
import { applyRules, type Ruled, type RuleContext } from "../../plugin/rules/apply.ts";
import type { Hierarchy } from "../../plugin/session/hierarchy.ts";
import { largestStall } from "../helpers/stall.ts";

/**
 * A session's rules are applied again at each new touch. Matching a touched file against a waiting
 * file's `paths:` is done once per pair (RuleContext.screened): whatever the sequence of touches,
 * edits, files coming and going and rule files, the decisions must be those of matching everything
 * every time.
 */
const WORKTREE = "/w";
const DIRS = ["/w", "/w/a", "/w/a/src", "/w/b", "/w/b/lib", "/w/a/b", "/w/c", "/w/c/d", "/w/c/d/e", "/w/x"];
const TOUCHED = ["/w/a/x.ts", "/w/a/src/y.ts", "/w/b/lib/z.md", "/w/b/q.ts", "/w/a/b/x.md", "/w/c/d/e/f.ts", "/w/x/a.ts", "/w/top.ts", "/w/c/k.md"];
const GLOBS = ["**/*.ts", "*.ts", "src/**", "lib/*.md", "b/**", "d/e/*.ts", "**/*.md", "a/**"];

let versionSeq = 0;
function version(dir: string, globs: readonly string[]): FileVersion {
  const path = `${dir}/AGENTS.md`;
  const body = `rules of ${dir} (${++versionSeq})`;
  const file = { path, dir, rel: path.slice(WORKTREE.length + 1), raw: body, body, frontmatter: { paths: [...globs] }, root: false, sha256: `v${versionSeq}`, size: body.length, truncated: false, mtimeMs: versionSeq };
  return file;
}

function hierarchyOf(files: readonly FileVersion[]): Hierarchy {
  return {
    files,
    tiers: files.map(() => 0),
    byPath: new Map(files.map((file) => [file.path, file])),
    dirSet: new Set(files.map((file) => file.dir)),
    starts: new Map(),
    startDirs: new Set(),
    pinnedStarts: new Set(),
    manual: new Set(),
    chains: [files],
    closest: new Set(),
  };
}

type Step = { kind: "touch"; at: number } | { kind: "forget"; at: number } | { kind: "file"; at: number; globs: string[] } | { kind: "drop"; at: number } | { kind: "rule"; at: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("touch" as const), at: fc.nat(TOUCHED.length - 1) }),
  fc.record({ kind: fc.constant("forget" as const), at: fc.nat(TOUCHED.length - 1) }),
  fc.record({ kind: fc.constant("file" as const), at: fc.nat(DIRS.length - 1), globs: fc.array(fc.constantFrom(...GLOBS), { minLength: 1, maxLength: 2 }) }),
  fc.record({ kind: fc.constant("drop" as const), at: fc.nat(DIRS.length - 1) }),
  fc.record({ kind: fc.constant("rule" as const), at: fc.nat(DIRS.length - 1) }),
);

describe("rules applied again with what was matched before", () => {
  test("screening touched files against only the newly waiting files decides as matching all of them", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), (steps) => {
        const files = new Map<string, FileVersion>();
        const touched: string[] = [];
        const ruleDirs = new Set<string>();
        const sessions = [{ matched: new Set<string>(), last: undefined as Ruled | undefined, chained: true }, { matched: new Set<string>(), last: undefined as Ruled | undefined, chained: false }];
        for (const s of steps) {
          if (s.kind === "touch" && !touched.includes(TOUCHED[s.at]!)) touched.push(TOUCHED[s.at]!);
          if (s.kind === "forget") touched.splice(touched.indexOf(TOUCHED[s.at]!) >>> 0, 1);
          if (s.kind === "file") files.set(DIRS[s.at]!, version(DIRS[s.at]!, s.globs));
          if (s.kind === "drop") files.delete(DIRS[s.at]!);
          if (s.kind === "rule") (ruleDirs.has(DIRS[s.at]!) ? ruleDirs.delete(DIRS[s.at]!) : ruleDirs.add(DIRS[s.at]!));
          const hierarchy = hierarchyOf([...files.values()]);
          const decisions = sessions.map((session) => {
            const context: RuleContext = {
              agent: "build",
              touchedFiles: [...touched],
              matched: session.matched,
              pinnedFiles: new Set(),
              pinnedDirs: new Set(),
              always: new Set(),
              ruleFiles: new Set([...ruleDirs].map((dir) => `${dir}/AGENTS.md`)),
              attached: new Map(),
              read: () => ({ problem: "no imports here" }),
              worktree: WORKTREE,
              replaces: new Map(),
              warn: () => {},
              ...(session.chained && session.last !== undefined ? { screened: session.last.screened } : {}),
            };
            const ruled = applyRules(hierarchy, context);
            session.last = ruled;
            return { files: ruled.files.map((file) => file.path), excluded: [...ruled.excluded], matched: [...session.matched].sort() };
          });
          expect(decisions[0]).toEqual(decisions[1]!);
        }
      }),
      { numRuns: 1500 },
    );
  });

  test("a touched file screened once is still matched against a file that starts waiting later", () => {
    const context = (touchedFiles: string[], matched: Set<string>, screened?: Ruled["screened"]): RuleContext => ({
      agent: "build", touchedFiles, matched, pinnedFiles: new Set(), pinnedDirs: new Set(), always: new Set(), ruleFiles: new Set(), attached: new Map(),
      read: () => ({ problem: "none" }), worktree: WORKTREE, replaces: new Map(), warn: () => {}, ...(screened ? { screened } : {}),
    });
    const matched = new Set<string>();
    const first = applyRules(hierarchyOf([version("/w/b", ["*.md"])]), context(["/w/a/x.ts"], matched));
    expect(first.excluded.has("/w/b/AGENTS.md")).toBe(true);
    const second = applyRules(hierarchyOf([version("/w/b", ["*.md"]), version("/w/a", ["*.ts"])]), context(["/w/a/x.ts"], matched, first.screened));
    expect(second.files.map((file) => file.path)).toEqual(["/w/a/AGENTS.md"]);
    expect([...matched]).toEqual(["/w/a/AGENTS.md"]);
  });
});

describe("applying the rules to a large hierarchy read from disk", () => {
  test("6,000 packed files new to the rules are ruled without decoding their texts (one task decoded them all to look for imports: 134-171 ms)", async () => {
    // Files as the store keeps them (zstd-packed past 1 KB): whether a body may import (a line
    // starting with @) is learned while its text is at hand, not by decoding every new version in
    // the task that rules a session continued with its history (3,000 directories: 70-100 ms).
    const text = (i: number) => `# package ${i}\n\n${Array.from({ length: 600 }, (_, k) => `- rule ${k} of package ${i}: keep the module boundaries\n`).join("")}`;
    const files = Array.from({ length: 6_000 }, (_, i) => {
      const dir = `${WORKTREE}/p${i}`;
      const body = i === 1234 ? `${text(i)}@docs/style.md\n` : text(i);
      return StoredVersion.read({ path: `${dir}/AGENTS.md`, dir, rel: `p${i}/AGENTS.md`, frontmatter: {}, root: false, sha256: `s${i}`, size: body.length, truncated: false, mtimeMs: 0 }, body, body);
    });
    const reads: string[] = [];
    const context: RuleContext = {
      agent: "build",
      touchedFiles: [],
      matched: new Set(),
      pinnedFiles: new Set(),
      pinnedDirs: new Set(),
      always: new Set(),
      ruleFiles: new Set(),
      attached: new Map(),
      read: (path) => (reads.push(path), { problem: "no such file" }),
      worktree: WORKTREE,
      replaces: new Map(),
      warn: () => {},
    };
    const { result, stallMs } = await largestStall(async () => applyRules(hierarchyOf(files), context));
    expect(result.files.length).toBe(6_000);
    // The one file with an import line is still expanded.
    expect(reads).toEqual([`${WORKTREE}/p1234/docs/style.md`]);
    // 134-171 ms before, 12-15 after: the bound is for a loaded machine.
    expect(stallMs).toBeLessThan(60);
  }, 30_000);
});
