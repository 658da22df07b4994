import { afterEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { join } from "node:path";
import { hierarchyOf, type ChainSource, type Hierarchy } from "../../plugin/session/hierarchy.ts";
import type { ToolPath } from "../../plugin/host/tool-paths.ts";
import { largestStall } from "../helpers/stall.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
afterEach(() => scratch.cleanup());

/** Everything a hierarchy says, in comparable form (its sets as sorted lists where order is not part of it). */
function shape(hierarchy: Hierarchy) {
  return {
    files: hierarchy.files.map((file) => file.path),
    tiers: hierarchy.tiers,
    dirs: [...hierarchy.dirSet].sort(),
    starts: [...hierarchy.starts].sort(),
    startDirs: [...hierarchy.startDirs].sort(),
    pinnedStarts: [...hierarchy.pinnedStarts].sort(),
    manual: [...hierarchy.manual].sort(),
    closest: [...hierarchy.closest].sort(),
    chains: hierarchy.chains.map((chain) => chain.map((file) => file.path)),
  };
}

describe("hierarchyOf", () => {
  test("a hierarchy of earlier touches lent to it changes nothing of the result (property)", async () => {
    const root = scratch.dir();
    const files: Record<string, string> = { "AGENTS.md": "root\n", "x.ts": "" };
    const dirs = ["a", "a/b", "a/b/c", "a/d", "e", "e/f/g", "h"];
    for (const [i, dir] of dirs.entries()) {
      if (i % 2 === 0) files[`${dir}/AGENTS.md`] = `${dir}\n`;
      files[`${dir}/x.ts`] = "";
    }
    files["a/b/CLAUDE.md"] = "claude\n";
    scratch.write(root, files);
    const store = scratch.store(root, { watch: false });
    // Directories and files, some missing (a path not created yet starts at its nearest existing directory).
    const paths: ToolPath[] = [
      ...dirs.map((dir) => ({ path: join(root, dir), isFile: false })),
      ...dirs.map((dir) => ({ path: join(root, dir, "x.ts"), isFile: true })),
      { path: join(root, "x.ts"), isFile: true },
      { path: join(root, "a/b/missing/y.ts"), isFile: true },
      { path: join(root, "nowhere"), isFile: false },
    ];
    const touches = fc.uniqueArray(fc.constantFrom(...paths), { selector: (touch) => touch.path, minLength: 1, maxLength: 10 });
    const pins = fc.uniqueArray(fc.constantFrom(...paths), { selector: (touch) => touch.path, maxLength: 3 });
    await fc.assert(
      fc.asyncProperty(touches, pins, fc.nat(), async (all, pinned, cut) => {
        const earlier = all.slice(0, cut % all.length);
        const before = await hierarchyOf(store, root, earlier, pinned);
        const held = { alone: new Set<string>(), lent: new Set<string>(before.dirSet) };
        const alone = await hierarchyOf(store, root, all, pinned, undefined, (dirs) => dirs.forEach((dir) => held.alone.add(dir)));
        const lent = await hierarchyOf(store, root, all, pinned, before, (dirs) => dirs.forEach((dir) => held.lent.add(dir)));
        expect(shape(lent)).toEqual(shape(alone));
        // What is held before the reads (with what the lender held) is every directory of the result.
        expect([...held.alone].sort()).toEqual([...alone.dirSet].sort());
        for (const dir of lent.dirSet) expect(held.lent.has(dir)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  test("thousands of touches are resolved and their chains asked for in slices of the event loop, not in one task", async () => {
    // A session continued with `opencode run -c` touches every path of its history at once: 3,000
    // directories' starts (a realpath and a stat each), walks and chains took 57-84 ms in one task.
    // Here each answer costs 20 µs of CPU: 4,000 touches are 80 ms of starts and 80 of chains.
    const spin = (ms: number) => {
      for (const end = performance.now() + ms; performance.now() < end; );
    };
    const source: ChainSource = {
      resolveStart: (path) => (spin(0.02), path),
      walkOf: (dir) => [dir, "/w"],
      chainOf: () => (spin(0.02), []),
    };
    const touches = Array.from({ length: 4_000 }, (_, i) => ({ path: `/w/d${i}`, isFile: false }));
    const held: string[] = [];
    const { result, stallMs } = await largestStall(() => hierarchyOf(source, "/w", touches, [], undefined, (_dirs, start) => held.push(start)));
    expect(result.startDirs.size).toBe(4_001);
    expect(held.length).toBe(4_001);
    // Slices of a few milliseconds; the bound leaves a loaded machine a wide margin.
    expect(stallMs).toBeLessThan(40);
  }, 30_000);
});
