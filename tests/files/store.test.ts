import { afterEach, describe, expect, test } from "bun:test";
import fs, { appendFileSync, linkSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, sep } from "node:path";
import { spawnSync } from "node:child_process";
import { RACY_MS } from "../../plugin/files/contained.ts";
import { MAX_DEPTH } from "../../plugin/files/worktree-index.ts";
import { bodies, recordingLogger, Scratch } from "./helpers.ts";
import { waitFor } from "../helpers/harness.ts";

/** `length` printable characters that do not compress (a version keeps text that does packed, in a few bytes). */
function noise(length: number, seed: number): string {
  let state = seed + 1;
  return Array.from({ length }, () => String.fromCharCode(33 + ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 16) % 94)).join("");
}

const scratch = new Scratch();
afterEach(() => scratch.cleanup());

/** Where inotify exists; elsewhere a store asked for it uses fs.watch. */
const LINUX = process.platform === "linux";

/** Longer than the store's quiet window: the directory is clean again when the next edit lands. */
const QUIET_GAP_MS = 60;

/** Watches start in slices (one turn of the event loop after they are asked for). */
const watchesStarted = () => new Promise((resolve) => setImmediate(resolve));


/** A worktree with a root file and `a/b/AGENTS.md`, a store, and session "s" retaining the walk from a/b/c. */
function setUp(options: Parameters<Scratch["store"]>[1] = {}) {
  const root = scratch.dir();
  scratch.write(root, { "AGENTS.md": "root\n", "a/b/AGENTS.md": "ab\n", "a/b/c/x.ts": "" });
  const store = scratch.store(root, options);
  const start = store.resolveStart(join(root, "a/b/c/x.ts"), true)!;
  const walk = store.walkOf(start);
  store.retain("s", walk);
  return { root, store, start, walk };
}

for (const watch of [true, false]) {
  describe(`containment at read time (watch: ${watch})`, () => {
    test("a chain directory the store knows, swapped for a symlink leading out: the outside file is never returned", async () => {
      const { root, store, start, walk } = setUp({ watch });
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "ab\n"]);
      const outside = scratch.dir();
      scratch.write(outside, { "AGENTS.md": "OUTSIDE\n", "c/AGENTS.md": "OUTSIDE\n" });
      renameSync(join(root, "a/b"), join(root, "a/b.old"));
      symlinkSync(outside, join(root, "a/b"));
      await store.settle(walk);
      const texts = (await store.chainOf(start)).map((file) => file.raw).join("");
      expect(texts).not.toContain("OUTSIDE");
      // The touched path now leads out of the worktree: no start at all.
      expect(store.resolveStart(join(root, "a/b/c/x.ts"), true)).toBeUndefined();
    });

    test("an intermediate directory swapped for a symlink leading out is caught at the next settle", async () => {
      const { root, store, start, walk } = setUp({ watch });
      await store.settle(walk);
      const outside = scratch.dir();
      scratch.write(outside, { "AGENTS.md": "OUTSIDE\n", "b/AGENTS.md": "OUTSIDE\n", "b/c/AGENTS.md": "OUTSIDE\n" });
      renameSync(join(root, "a"), join(root, "a.old"));
      symlinkSync(outside, join(root, "a"));
      await store.settle(walk);
      expect((await store.chainOf(start)).map((file) => file.raw).join("")).not.toContain("OUTSIDE");
    });

    test("a retargeted AGENTS.md symlink serves the new target's text at the next settle; an edit of the target too", async () => {
      const { root, store, start, walk } = setUp({ watch });
      scratch.write(root, { "shared/one.md": "one\n", "shared/two.md": "two\n" });
      symlinkSync("../../../shared/one.md", join(root, "a/b/c/AGENTS.md"));
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "one\n"]);
      unlinkSync(join(root, "a/b/c/AGENTS.md"));
      symlinkSync("../../../shared/two.md", join(root, "a/b/c/AGENTS.md"));
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "two\n"]);
      writeFileSync(join(root, "shared/two.md"), "two, edited\n");
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "two, edited\n"]);
    });
  });
}

describe("start resolution", () => {
  for (const watch of [false, true]) {
    test(`a path under a dangling symlink does not change the structure at every check (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n" });
      symlinkSync("nowhere", join(root, "dangling"));
      const store = scratch.store(root, { watch });
      const start = store.resolveStart(join(root, "dangling/x.ts"), true)!;
      expect(start).toBe(root);
      const walk = store.walkOf(start);
      store.retain("s", walk);
      await store.chainOf(start);
      await store.settle(new Set(walk));
      await Bun.sleep(60);
      await store.settle(new Set(walk));
      const before = store.generation;
      for (let i = 0; i < 5; i++) {
        store.resolveStart(join(root, "dangling/x.ts"), true);
        await store.settle(new Set(walk));
      }
      expect(store.generation).toBe(before);
    });

    test(`paths through a symlinked directory: no structure change while the link stays, and one when it is retargeted (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n", "a/AGENTS.md": "a\n", "a/x.ts": "", "b/AGENTS.md": "b\n", "b/x.ts": "" });
      symlinkSync("a", join(root, "link"));
      const store = scratch.store(root, { watch });
      const paths: [string, boolean][] = [[join(root, "link/x.ts"), true], [join(root, "link/new/deeper/y.ts"), true], [join(root, "link"), false]];
      expect(paths.map(([path, isFile]) => store.resolveStart(path, isFile))).toEqual([join(root, "a"), join(root, "a"), join(root, "a")]);
      const walk = store.walkOf(join(root, "a"));
      store.retain("s", walk);
      await store.chainOf(join(root, "a"));
      await store.settle(new Set(walk));
      await Bun.sleep(60);
      await store.settle(new Set(walk));
      const before = store.generation;
      for (let i = 0; i < 5; i++) await store.settle(new Set(walk));
      expect(store.generation).toBe(before);
      unlinkSync(join(root, "link"));
      symlinkSync("b", join(root, "link"));
      await store.settle(new Set(walk));
      expect(store.generation).toBeGreaterThan(before);
      expect(paths.map(([path, isFile]) => store.resolveStart(path, isFile))).toEqual([join(root, "b"), join(root, "b"), join(root, "b")]);
    });
  }

  /** A store holding `start`'s walk, settled twice (watches started, nothing owed). */
  async function settledOn(root: string, watch: boolean, touched: string, start: string) {
    const store = scratch.store(root, { watch });
    expect(store.resolveStart(touched, true)).toBe(start);
    const walk = new Set(store.walkOf(start));
    store.retain("s", walk);
    await store.chainOf(start);
    await store.settle(walk);
    await Bun.sleep(60);
    await store.settle(walk);
    return { store, settle: async () => {
      await store.settle(walk);
      await Bun.sleep(60);
      await store.settle(walk);
    } };
  }

  for (const watch of [false, true]) {
    test(`the second symlink on a path retargeted: the start moves (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n", "b/keep": "", "c/AGENTS.md": "c\n", "c/x.ts": "", "d/AGENTS.md": "d\n", "d/x.ts": "" });
      symlinkSync("../c", join(root, "b/inner"));
      symlinkSync("b/inner", join(root, "a")); // a -> b/inner -> ../c
      const touched = join(root, "a/x.ts");
      const { store, settle } = await settledOn(root, watch, touched, join(root, "c"));
      unlinkSync(join(root, "b/inner"));
      symlinkSync("../d", join(root, "b/inner"));
      await settle();
      expect(store.resolveStart(touched, true)).toBe(join(root, "d"));
    });

    test(`a link's own directory swapped for a link to another holding the same link text: the start moves (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n", "p/keep": "", "c/AGENTS.md": "c\n", "c/x.ts": "", "q/c/AGENTS.md": "qc\n", "q/c/x.ts": "", "q/r/keep": "" });
      symlinkSync("../c", join(root, "p/l"));
      symlinkSync("../c", join(root, "q/r/l"));
      const touched = join(root, "p/l/x.ts");
      const { store, settle } = await settledOn(root, watch, touched, join(root, "c"));
      renameSync(join(root, "p"), join(root, "p.old"));
      symlinkSync("q/r", join(root, "p"));
      await settle();
      expect(store.resolveStart(touched, true)).toBe(join(root, "q/c"));
    });

    test(`a dangling symlink reached through a directory link: the directory link retargeted moves the start (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n", "c/AGENTS.md": "c\n", "d/AGENTS.md": "d\n" });
      symlinkSync("nowhere", join(root, "c/dl"));
      symlinkSync("nowhere", join(root, "d/dl"));
      symlinkSync("c", join(root, "a")); // a/dl -> c/nowhere, dangling
      const touched = join(root, "a/dl/x.ts");
      const { store, settle } = await settledOn(root, watch, touched, join(root, "c"));
      unlinkSync(join(root, "a"));
      symlinkSync("d", join(root, "a")); // a/dl -> d/nowhere, still dangling
      await settle();
      expect(store.resolveStart(touched, true)).toBe(join(root, "d"));
    });

    test(`a dangling symlink's target made: a path under it starts there (watch ${watch}; found in review)`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n" });
      symlinkSync("nowhere", join(root, "dangling"));
      const touched = join(root, "dangling/x.ts");
      const { store, settle } = await settledOn(root, watch, touched, root);
      scratch.write(root, { "nowhere/AGENTS.md": "n\n" });
      await settle();
      expect(store.resolveStart(touched, true)).toBe(join(root, "nowhere"));
    });
  }

  test("2,000 touched files behind one symlink: a settle reads the link, it resolves no path again (found in review: 20.9 ms a step against 2.2)", async () => {
    // OpenCode started in app/, a symlink to apps/web inside the worktree: every path the agent touches goes through it.
    const root = scratch.dir();
    const files: Record<string, string> = { "AGENTS.md": "r\n" };
    for (let i = 0; i < 200; i++) for (let j = 0; j < 10; j++) files[`apps/web/m${i}/f${j}.ts`] = "";
    scratch.write(root, files);
    symlinkSync("apps/web", join(root, "app"));
    const store = scratch.store(root, { watch: true });
    const starts = new Set<string>();
    for (let i = 0; i < 200; i++) for (let j = 0; j < 10; j++) starts.add(store.resolveStart(join(root, "app", `m${i}/f${j}.ts`), true)!);
    const dirs = new Set([...starts].flatMap((start) => store.walkOf(start)));
    store.retain("s", dirs);
    for (const start of starts) await store.chainOf(start);
    await Bun.sleep(80);
    await store.settle(dirs);
    const native = fs.realpathSync.native;
    let calls = 0;
    // Counted where the store resolves paths (node:fs's own function, wrapped for this settle only).
    fs.realpathSync.native = ((path: fs.PathLike, options?: unknown) => (calls++, native(path, options as never))) as typeof native;
    try {
      await store.settle(dirs);
    } finally {
      fs.realpathSync.native = native;
    }
    expect(calls).toBeLessThanOrEqual(10);
  });

  test("a directory named by a file argument (read of a directory) starts at itself; a file at its parent", () => {
    const { root, store } = setUp();
    expect(store.resolveStart(join(root, "a/b"), true)).toBe(join(root, "a/b"));
    expect(store.resolveStart(join(root, "a/b/c/x.ts"), true)).toBe(join(root, "a/b/c"));
    expect(store.resolveStart(join(root, "a/b"), false)).toBe(join(root, "a/b"));
  });

  test("a missing path starts at its nearest existing ancestor; outside the worktree is undefined", () => {
    const { root, store } = setUp();
    expect(store.resolveStart(join(root, "a/new/deep/file.ts"), true)).toBe(join(root, "a"));
    expect(store.resolveStart(join(root, "a/b/c/new.ts"), true)).toBe(join(root, "a/b/c"));
    expect(store.resolveStart(tmpdir(), false)).toBeUndefined();
  });

  test("a path deeper than the worktree index looks, or through more links than realpath follows (a loop), starts nowhere (found by a hunt)", () => {
    const { root, store } = setUp();
    symlinkSync(".", join(root, "a/here"));
    // MAX_DEPTH directory levels: still the ordinary climb to the nearest existing ancestor; one more is out of reach.
    expect(store.resolveStart(join(root, "a", "d/".repeat(MAX_DEPTH - 1), "x.ts"), true)).toBe(join(root, "a"));
    expect(store.resolveStart(join(root, "a", "d/".repeat(MAX_DEPTH), "x.ts"), true)).toBeUndefined();
    // A few times through the loop resolves (to a/); 50 times is ELOOP (Linux follows 40 links), within MAX_DEPTH.
    expect(store.resolveStart(join(root, "a", "here/".repeat(3), "x.ts"), true)).toBe(join(root, "a"));
    expect(store.resolveStart(join(root, "a", "here/".repeat(50), "x.ts"), true)).toBeUndefined();
  });

  for (const watch of [true, false]) {
    test(`a context file created in a new directory joins the chain at the next settle (watch: ${watch})`, async () => {
      const { root, store } = setUp({ watch });
      const touched = join(root, "a/new/file.ts");
      const before = store.resolveStart(touched, true)!;
      store.retain("s", store.walkOf(before));
      await store.settle(store.walkOf(before));
      expect(await bodies(store, before)).toEqual(["root\n"]);
      const generation = store.generation;
      scratch.write(root, { "a/new/AGENTS.md": "new\n" });
      await store.settle(store.walkOf(before));
      expect(store.generation).toBeGreaterThan(generation);
      const after = store.resolveStart(touched, true)!;
      expect(after).toBe(join(root, "a/new"));
      expect(await bodies(store, after)).toEqual(["root\n", "new\n"]);
    });
  }
});

for (const events of ["inotify", "fs.watch"] as const) describe(`freshness (events: ${events})`, () => {
  const setUpHere = (options: Parameters<Scratch["store"]>[1] = {}) => setUp({ events, ...options });
  for (const options of events === "inotify" ? [{ watch: true }, { watch: false }, { watch: true, maxWatchedDirs: 1 }] : [{ watch: true }]) {
    test(`1,000 timed edits, each seen by the settle right after it (${JSON.stringify(options)})`, async () => {
      const { root, store, start, walk } = setUpHere(options);
      await store.settle(walk);
      const file = join(root, "a/b/AGENTS.md");
      let seen = 0;
      const misses: string[] = [];
      for (let i = 0; i < 1000; i++) {
        writeFileSync(file, `edit ${i}\n`);
        // Every 10th edit: a second write to the same file well under 1 ms later (Bun drops its event).
        if (i % 10 === 0) writeFileSync(file, `edit ${i}b\n`);
        await store.settle(walk);
        const chain = await store.chainOf(start);
        if (chain[1]?.body === (i % 10 === 0 ? `edit ${i}b\n` : `edit ${i}\n`)) seen++;
        else misses.push(`${i}: ${chain[1]?.body}`);
        // Gaps of every size between edits: none, around Bun's drop window, past the quiet window.
        if (i % 50 === 49) await Bun.sleep(QUIET_GAP_MS);
        else if (i % 10 === 4) await Bun.sleep(6);
        else if (i % 10 === 7) await Bun.sleep(2);
      }
      expect(misses).toEqual([]);
      expect(seen).toBe(1000);
    }, 30_000);
  }

  test("an AGENTS.md hard-linked to a file elsewhere, edited in place through the other name (no event in its own directory), is seen at the next settle", async () => {
    const { root, store, start, walk } = setUpHere();
    scratch.write(root, { "docs/shared.md": "v1\n" });
    linkSync(join(root, "docs/shared.md"), join(root, "a/b/c/AGENTS.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "v1\n"]);
    await watchesStarted();
    await Bun.sleep(QUIET_GAP_MS);
    await store.settle(walk);
    appendFileSync(join(root, "docs/shared.md"), "v2 appended\n");
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "v1\nv2 appended\n"]);
  });

  test("a symlinked AGENTS.md whose target path goes through a symlinked directory, repointed: the new target is served at the next settle", async () => {
    const { root, store, start, walk } = setUpHere();
    scratch.write(root, { "real1/x.md": "real1\n", "real2/x.md": "real2\n" });
    symlinkSync("real1", join(root, "lnk"));
    symlinkSync("../../../lnk/x.md", join(root, "a/b/c/AGENTS.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "real1\n"]);
    await watchesStarted();
    await Bun.sleep(QUIET_GAP_MS);
    await store.settle(walk);
    symlinkSync("real2", join(root, "lnk.new"));
    renameSync(join(root, "lnk.new"), join(root, "lnk"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "ab\n", "real2\n"]);
  });

  test("an AGENTS.md symlink that leads nowhere yet, or out of the worktree: its target made (or the outside path pointed back inside) is served at the next settle (found in review)", async () => {
    const { root, store, start, walk } = setUpHere();
    const outside = scratch.dir();
    scratch.write(outside, { "out.md": "OUTSIDE\n" });
    // c: a dangling link (a generated doc not written yet); b: a link leading out, refused.
    symlinkSync("../../../docs/c.md", join(root, "a/b/c/AGENTS.md"));
    unlinkSync(join(root, "a/b/AGENTS.md"));
    symlinkSync(join(outside, "out.md"), join(root, "a/b/AGENTS.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n"]);
    await watchesStarted();
    await Bun.sleep(QUIET_GAP_MS);
    await store.settle(walk);
    // Neither change is an event in a/b or a/b/c.
    scratch.write(root, { "docs/c.md": "generated\n", "docs/b.md": "b inside\n" });
    unlinkSync(join(outside, "out.md"));
    symlinkSync(join(root, "docs/b.md"), join(outside, "out.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "b inside\n", "generated\n"]);
  });

  for (const leaves of [10, 40]) {
    test(`an edit of a directory that ${leaves} cached chains go through reaches every one of them, after one of them was dropped and made again`, async () => {
      const root = scratch.dir();
      const files: Record<string, string> = { "AGENTS.md": "root\n", "common/AGENTS.md": "common v1\n" };
      for (let i = 0; i < leaves; i++) files[`common/leaf${i}/AGENTS.md`] = `leaf ${i}\n`;
      scratch.write(root, files);
      const store = scratch.store(root);
      const starts = Array.from({ length: leaves }, (_, i) => store.resolveStart(join(root, `common/leaf${i}/x.ts`), true)!);
      const dirs = new Set(starts.flatMap((start) => store.walkOf(start)));
      store.retain("s", dirs);
      for (const start of starts) expect((await bodies(store, start))[1]).toBe("common v1\n");
      await watchesStarted();
      // One chain dropped (its own directory edited) and made again: the others stay known through "common".
      writeFileSync(join(root, "common/leaf3/AGENTS.md"), "leaf 3, edited\n");
      await store.settle(dirs, performance.now());
      expect((await bodies(store, starts[3]!))[2]).toBe("leaf 3, edited\n");
      writeFileSync(join(root, "common/AGENTS.md"), "common v2, longer\n");
      await store.settle(dirs, performance.now());
      for (const [i, start] of starts.entries()) expect(await bodies(store, start)).toEqual(["root\n", "common v2, longer\n", i === 3 ? "leaf 3, edited\n" : `leaf ${i}\n`]);
    });
  }

  test("a deleted context file leaves the chain; an atomic save (rename over) is seen", async () => {
    const { root, store, start, walk } = setUpHere();
    await store.settle(walk);
    writeFileSync(join(root, "a/b/AGENTS.md.tmp"), "saved atomically\n");
    renameSync(join(root, "a/b/AGENTS.md.tmp"), join(root, "a/b/AGENTS.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n", "saved atomically\n"]);
    rmSync(join(root, "a/b/AGENTS.md"));
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["root\n"]);
  });

  test("root: true ends the walk; CLAUDE.md is used when AGENTS.md is absent", async () => {
    const { root, store, start, walk } = setUpHere();
    scratch.write(root, { "a/b/AGENTS.md": "---\nroot: true\n---\nab\n", "a/b/c/CLAUDE.md": "claude\n" });
    await store.settle(walk);
    expect(await bodies(store, start)).toEqual(["ab\n", "claude\n"]);
  });

  // Off Linux "inotify" is fs.watch (no inotify there): only the watch-based tests apply.
  if (events === "inotify" && process.platform === "linux") {
    test("the barrier is a drain of the kernel's queue: settled as soon as asked, one drain per new `since`, prepare does nothing", async () => {
      const { root, store, start, walk } = setUpHere();
      expect(store.stats.events).toBe("inotify");
      await store.settle(walk);
      await watchesStarted();
      for (let i = 0; i < 100; i++) {
        writeFileSync(join(root, "a/b/AGENTS.md"), `edit ${i}\n`);
        const since = performance.now();
        store.prepare(since);
        const before = store.stats.barriers;
        const settled = store.settle(new Set(walk), since);
        // Drained before settle returned: no event-loop turn was needed.
        expect(store.stats.barriers).toBe(before + 1);
        await settled;
        await store.settle(new Set(walk), since);
        expect(store.stats.barriers).toBe(before + 1);
        expect(await bodies(store, start)).toEqual(["root\n", `edit ${i}\n`]);
      }
    });

    test("events lost to a full kernel queue: every directory is checked once, so an edit saved after the overflow is seen", async () => {
      const { root, store, start, walk } = setUpHere();
      await store.settle(walk);
      await watchesStarted();
      // The check each new watch owes is done: from here on, only events make a directory due.
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "ab\n"]);
      // Over 16,384 queued events (the kernel's default cap): three a file (create, modify, close).
      const flood = join(root, "a/b/c");
      for (let i = 0; i < 7000; i++) writeFileSync(join(flood, `f${i}`), "x");
      // Its event is dropped: the queue is full.
      writeFileSync(join(root, "a/b/AGENTS.md"), "after the overflow\n");
      await store.settle(walk);
      expect(await bodies(store, start)).toEqual(["root\n", "after the overflow\n"]);
    }, 20_000);
  }

  if (events === "fs.watch") test("a barrier started early (prepare) is the one the settle waits for: its hop overlaps the work in between", async () => {
    const { root, store, start, walk } = setUpHere();
    await store.settle(walk);
    await watchesStarted();
    // Saved before the step: the barrier prepared at the step's start must vouch for it.
    writeFileSync(join(root, "a/b/AGENTS.md"), "saved before the step\n");
    const since = performance.now();
    store.prepare(since);
    const written = store.stats.barriers;
    await store.settle(walk, since);
    expect(store.stats.barriers).toBe(written);
    expect(await bodies(store, start)).toEqual(["root\n", "saved before the step\n"]);
  });

  if (events === "fs.watch") test("a prepared barrier written before a later settle's `since` is not shared: an edit saved in between is seen", async () => {
    const { root, store, start, walk } = setUpHere();
    await store.settle(walk);
    await watchesStarted();
    for (let i = 0; i < 50; i++) {
      store.prepare(performance.now());
      // Its sentinel is written a microtask after prepare: the edit below comes after it.
      await Promise.resolve();
      writeFileSync(join(root, "a/b/AGENTS.md"), `edit ${i}\n`);
      const before = store.stats.barriers;
      await store.settle(walk, performance.now());
      expect(store.stats.barriers).toBe(before + 1);
      expect(await bodies(store, start)).toEqual(["root\n", `edit ${i}\n`]);
    }
  });

  test("a new chain read after a settle's `since` (which that settle does not stat again): an edit saved after the read is seen by the next settle", async () => {
    const root = scratch.dir();
    for (let i = 0; i < 20; i++) scratch.write(root, { [`d${i}/e/AGENTS.md`]: `first ${i}\n` });
    // Older than the racy window: a read of them is trusted (a racy one is read again at every settle).
    await Bun.sleep(QUIET_GAP_MS);
    for (let i = 0; i < 20; i++) {
      const store = scratch.store(root, { events });
      const since = performance.now();
      store.prepare(since);
      const start = store.resolveStart(join(root, `d${i}/e/x.ts`), true)!;
      const walk = store.walkOf(start);
      store.retain("s", walk);
      expect(await bodies(store, start)).toEqual([`first ${i}\n`]);
      // Saved after the read, before the settle: this settle may leave it, the next must not.
      writeFileSync(join(root, `d${i}/e/AGENTS.md`), `second ${i}\n`);
      await store.settle(new Set(walk), since);
      await store.settle(new Set(walk), performance.now());
      expect(await bodies(store, start)).toEqual([`second ${i}\n`]);
      await store.dispose();
    }
  });

  // watch: false ignores `events`: it runs once, under inotify's describe.
  for (const watch of events === "inotify" ? [true, false] : [true]) {
    test(`settles that name when they start (parallel calls): an edit saved after one check and before the next settle's start is seen (watch: ${watch})`, async () => {
      const { root, store, start, walk } = setUpHere({ watch });
      await store.settle(walk);
      await watchesStarted();
      const dirs = new Set(walk);
      for (let i = 0; i < 200; i++) {
        // The second call of a step started with the first: it may trust what the first checked.
        const since = performance.now();
        await store.settle(dirs, since);
        await store.settle(dirs, since);
        writeFileSync(join(root, "a/b/AGENTS.md"), `edit ${i}\n`);
        await store.settle(dirs, performance.now());
        expect(await bodies(store, start)).toEqual(["root\n", `edit ${i}\n`]);
        if (i % 20 === 19) await Bun.sleep(QUIET_GAP_MS);
      }
    });
  }

  for (const maxDepth of [3, 10]) test(`an edit drops exactly the cached chains whose walk goes through its directory: a sibling sorting between it and its children, and a start past maxDepth (${maxDepth}), keep theirs`, async () => {
    const root = scratch.dir();
    const levels = (count: number) => Array.from({ length: count }, (_, i) => `d${i}`).join("/");
    scratch.write(root, { "AGENTS.md": "root\n", "a/b/AGENTS.md": "ab\n", "a/b/c/x.ts": "", "a/b-x/c/x.ts": "", "a/b-x/AGENTS.md": "sibling\n", [`a/b/${levels(maxDepth)}/x.ts`]: "", [`a/b/${levels(maxDepth + 1)}/x.ts`]: "" });
    const store = scratch.store(root, { watch: false, maxDepth });
    const rels = ["a/b/AGENTS.md", "a/b/c/x.ts", `a/b/${levels(maxDepth)}/x.ts`, "a/b-x/c/x.ts", `a/b/${levels(maxDepth + 1)}/x.ts`];
    const starts = rels.map((rel) => store.resolveStart(join(root, rel), true)!);
    // Through a/b: itself, a child, a start maxDepth levels below; not the sibling, nor a start one level further.
    expect(starts.map((start) => store.walkOf(start).includes(join(root, "a/b")))).toEqual([true, true, true, false, false]);
    const dirs = new Set(starts.flatMap((start) => store.walkOf(start)));
    store.retain("s", dirs);
    const before = await Promise.all(starts.map((start) => store.chainOf(start)));
    await store.settle(dirs);
    writeFileSync(join(root, "a/b/AGENTS.md"), "ab, edited\n");
    await store.settle(dirs, performance.now());
    const after = await Promise.all(starts.map((start) => store.chainOf(start)));
    expect(after.map((chain, i) => chain === before[i])).toEqual([false, false, false, true, true]);
    expect(await bodies(store, starts[1]!)).toEqual(["root\n", "ab, edited\n"]);
  });

  test("an unchanged chain is the same object, and the generation does not move", async () => {
    const { store, start, walk } = setUpHere();
    await store.settle(walk);
    const chain = await store.chainOf(start);
    const generation = store.generation;
    await store.settle(walk);
    expect(store.chainOf(start)).toBe(chain);
    expect(store.generation).toBe(generation);
  });
});

describe("watches and memory", () => {
  // The window is UNYIELDED_MS (5 ms) of wall time from the first read: a pause of the shared machine
  // (another process's turn, the collector) can close it before the second call, so it gets two more tries.
  test("a call that follows another with no turn of the event loop between them reads its new chain inline, ahead of the watches queued before it", { retry: 2 }, async () => {
    const { root, store } = setUp();
    scratch.write(root, { "n/e/w/AGENTS.md": "new\n", "o/t/h/AGENTS.md": "other\n" });
    // The set-up's own watches start, so that the window below opens with the last call.
    await watchesStarted();
    const watched = store.stats.watched;
    // The last call retained a walk: its watches wait in the queue for a turn that does not come.
    store.retain("t", store.walkOf(store.resolveStart(join(root, "o/t/h/x.ts"), true)!));
    // The next call begins (its barrier prepared at its start), with no turn since. No call waits for
    // a watch (an unwatched directory is stat'd by each settle), so the watches do not go first.
    store.prepare(performance.now());
    const start = store.resolveStart(join(root, "n/e/w/x.ts"), true)!;
    const chain = store.chainOf(start);
    expect(chain instanceof Promise).toBe(false);
    expect((chain as Exclude<typeof chain, Promise<unknown>>).map((file) => file.body)).toEqual(["root\n", "new\n"]);
    // Only the new chain's own directories are watched: each just before its read (with inotify).
    expect(store.stats.watched).toBe(watched + (LINUX ? 3 : 0));
    // The call retains what it read, as the engine does; the queued watches start at the loop's next turn.
    store.retain("n", store.walkOf(start));
    await watchesStarted();
    expect(store.stats.watched).toBe(watched + 6);
  });

  test.if(LINUX)("with inotify a directory is watched before its first read: the session that holds it owes it no check; one nobody holds is let go at the next turn", async () => {
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "root\n", "a/b/AGENTS.md": "ab\n", "a/b/c/x.ts": "", "o/AGENTS.md": "o\n" });
    // The time to wait is the point (the racy window), not an event: a racy read is checked again whatever its watch says.
    await Bun.sleep(RACY_MS + 10);
    const store = scratch.store(root);
    const start = store.resolveStart(join(root, "a/b/c/x.ts"), true)!;
    const walk = store.walkOf(start);
    store.prepare(performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "ab\n"]);
    expect(store.stats).toMatchObject({ watched: walk.length, dirty: 0 });
    store.retain("s", walk);
    // An edit right after the read comes as an event of the watch that was there before it.
    writeFileSync(join(root, "a/b/AGENTS.md"), "ab, edited\n");
    await store.settle(new Set(walk), performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "ab, edited\n"]);
    // A chain read that nobody retains: its directory's watch goes at the background's next slice.
    const other = store.resolveStart(join(root, "o/x.ts"), false)!;
    expect(await bodies(store, other)).toEqual(["root\n", "o\n"]);
    expect(store.stats.watched).toBe(walk.length + 1);
    await watchesStarted();
    expect(store.stats.watched).toBe(walk.length);
  });

  test.if(LINUX)("a directory made below a start between the start's resolution and its first read is found by the next step (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "root\n", "a/AGENTS.md": "a\n" });
    const store = scratch.store(root);
    // A touched path in a directory not made yet: the start is a/, and a/new is remembered as missing.
    const touched = join(root, "a/new/x.ts");
    const start = store.resolveStart(touched, true)!;
    expect(start).toBe(join(root, "a"));
    // a/new is made before a/ is first read (its read waited for a slice, say): no watch saw it.
    scratch.write(root, { "a/new/AGENTS.md": "new\n" });
    // Past the racy window (the time is the point, not an event): a racy read is checked again anyway.
    await Bun.sleep(RACY_MS + 10);
    store.prepare(performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "a\n"]);
    store.retain("s", store.walkOf(start));
    const since = performance.now();
    await store.settle(new Set(store.walkOf(start)), since);
    const now = store.resolveStart(touched, true)!;
    expect(now).toBe(join(root, "a/new"));
    expect(await bodies(store, now)).toEqual(["root\n", "a\n", "new\n"]);
  });

  test.if(LINUX)("a racy read of a watched directory is not read again at every step: a later write makes an event (found in review)", async () => {
    const root = scratch.dir();
    // Written just before the read: racy (its ctime within RACY_MS), so its record asks for a retry.
    scratch.write(root, { "AGENTS.md": "root\n", "a/AGENTS.md": "a\n" });
    const store = scratch.store(root);
    const start = join(root, "a");
    await store.chainOf(start);
    store.retain("s", store.walkOf(start));
    await watchesStarted();
    const record = store.recordOf(start);
    for (let step = 0; step < 5; step++) {
      await store.settle(new Set(store.walkOf(start)), performance.now());
      await watchesStarted();
    }
    expect(store.recordOf(start)).toBe(record);
    // And the retry is not lost: an edit is an event, seen at the next step.
    writeFileSync(join(root, "a/AGENTS.md"), "a, edited\n");
    await store.settle(new Set(store.walkOf(start)), performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "a, edited\n"]);
  });

  /**
   * setUp's worktree, its files written long before (a racy read is checked again whatever its watch
   * says), read while nobody held it (the watches it had for the read let go since), then retained
   * by a session: its records come from before its watches, which have not started yet.
   */
  const readBeforeWatching = async () => {
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "root\n", "a/b/AGENTS.md": "ab\n", "a/b/c/x.ts": "" });
    // The time to wait is the point (the racy window), not an event.
    await Bun.sleep(RACY_MS + 10);
    const store = scratch.store(root);
    const start = store.resolveStart(join(root, "a/b/c/x.ts"), true)!;
    const walk = store.walkOf(start);
    store.prepare(performance.now());
    expect(store.chainOf(start) instanceof Promise).toBe(false);
    await watchesStarted();
    expect(store.stats.watched).toBe(0);
    store.retain("s", walk);
    expect(store.stats.watched).toBe(0);
    return { root, store, start, walk };
  };

  test.if(LINUX)("a watch started in the background makes the check it owes there: the next step stats none of those directories (inotify)", async () => {
    const { root, store, start, walk } = await readBeforeWatching();
    await watchesStarted();
    expect(store.stats.watched).toBe(walk.length);
    expect(store.stats.dirty).toBe(0);
    // An edit now comes as an event: seen.
    writeFileSync(join(root, "a/b/AGENTS.md"), "ab, edited\n");
    await store.settle(new Set(walk), performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "ab, edited\n"]);
  });

  test("an edit saved between a directory's read and its watch's start (no event for it) is seen at the next settle", async () => {
    const { root, store, start, walk } = await readBeforeWatching();
    writeFileSync(join(root, "a/b/AGENTS.md"), "ab, edited before its watch\n");
    await watchesStarted();
    await store.settle(new Set(walk), performance.now());
    expect(await bodies(store, start)).toEqual(["root\n", "ab, edited before its watch\n"]);
  });

  test("calls that go on with no turn of the event loop stop reading inline after a few ms: the loop gets its turn", async () => {
    const { root, store } = setUp();
    scratch.write(root, { "n/e/w/AGENTS.md": "new\n" });
    // Work queued, then 20 ms of other work with no turn (the host's, or earlier calls').
    for (const until = performance.now() + 20; performance.now() < until; );
    store.prepare(performance.now());
    expect(store.stats.watched).toBe(0);
    const start = store.resolveStart(join(root, "n/e/w/x.ts"), true)!;
    const chain = store.chainOf(start);
    expect(chain instanceof Promise).toBe(true);
    expect((await chain).map((file) => file.body)).toEqual(["root\n", "new\n"]);
    // The task that read it ran no background work: the caller went on first, the watches start in a
    // task of their own. Only the chain's directories are watched (with inotify, each before its read).
    const read = LINUX ? 4 : 0;
    expect(store.stats.watched).toBe(read);
    store.retain("n", store.walkOf(start));
    await watchesStarted();
    expect(store.stats.watched).toBe(7);
  });

  for (const events of ["inotify", "fs.watch"] as const) {
    test(`a branch switch (300 watched directories deleted and written again): one structure pass, every chain fresh (events: ${events})`, async () => {
      const root = scratch.dir();
      const files: Record<string, string> = { "AGENTS.md": "root\n" };
      for (let i = 0; i < 300; i++) files[`pkg/p${i % 10}/q${i}/AGENTS.md`] = `q${i}\n`;
      scratch.write(root, files);
      const store = scratch.store(root, { events });
      const starts = Array.from({ length: 300 }, (_, i) => store.resolveStart(join(root, `pkg/p${i % 10}/q${i}/x.ts`), true)!);
      const dirs = new Set(starts.flatMap((start) => store.walkOf(start)));
      store.retain("s", dirs);
      for (const start of starts) await store.chainOf(start);
      await watchesStarted();
      await store.settle(dirs);
      await Bun.sleep(QUIET_GAP_MS);
      await store.settle(dirs);
      const generation = store.generation;
      rmSync(join(root, "pkg"), { recursive: true });
      // The same texts: the generation then moves only for structure passes, not for new versions.
      scratch.write(root, files);
      // fs.watch: the events arrive meanwhile, one by one.
      if (events === "fs.watch") await Bun.sleep(QUIET_GAP_MS);
      await store.settle(dirs);
      // A few structure passes for all the directories replaced (the drain's, then at most three in
      // the check, level by level), not one each (300 here; that made it quadratic: 3 s at 3,000).
      expect(store.generation - generation).toBeLessThanOrEqual(5);
      await store.settle(dirs);
      for (let i = 0; i < 300; i += 37) expect(await bodies(store, store.resolveStart(join(root, `pkg/p${i % 10}/q${i}/x.ts`), true)!)).toEqual(["root\n", `q${i}\n`]);
      // And an edit after the switch, in a directory that was replaced, is seen.
      writeFileSync(join(root, "pkg/p3/q3/AGENTS.md"), "q3 edited\n");
      if (events === "fs.watch") await Bun.sleep(QUIET_GAP_MS);
      await store.settle(dirs);
      expect(await bodies(store, store.resolveStart(join(root, "pkg/p3/q3/x.ts"), true)!)).toEqual(["root\n", "q3 edited\n"]);
    });
  }

  test.skipIf(process.platform !== "linux")("one inotify instance serves every store of the process (128 per user): 200 stores, all on inotify", () => {
    const inotifyFds = () => readdirSync("/proc/self/fd").filter((fd) => { try { return readlinkSync(`/proc/self/fd/${fd}`) === "anon_inode:inotify"; } catch { return false; } }).length;
    const before = inotifyFds();
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "root\n" });
    const stores = Array.from({ length: 200 }, () => scratch.store(root));
    expect(stores.every((store) => store.stats.events === "inotify")).toBe(true);
    expect(inotifyFds()).toBeLessThanOrEqual(before + 1);
    for (const store of stores) store.dispose();
    expect(inotifyFds()).toBeLessThanOrEqual(before);
  });

  test("a catalog callback that throws loses no other event: the directory stays due, and the next edit elsewhere is seen", async () => {
    const root = scratch.dir();
    scratch.write(root, { "x/AGENTS.md": "x1\n", "y/AGENTS.md": "y1\n" });
    const log = recordingLogger();
    const store = scratch.store(root, { log, onCandidate: (path) => { if (path.includes(`${sep}x${sep}`)) throw new Error("EACCES: catalog could not look"); } });
    const [x, y] = [store.resolveStart(join(root, "x/f.ts"), true)!, store.resolveStart(join(root, "y/f.ts"), true)!];
    const dirs = new Set([...store.walkOf(x), ...store.walkOf(y)]);
    store.retain("s", dirs);
    await store.chainOf(x);
    await store.chainOf(y);
    await watchesStarted();
    await store.settle(dirs);
    await Bun.sleep(QUIET_GAP_MS);
    await store.settle(dirs);
    writeFileSync(join(root, "x/AGENTS.md"), "x2\n");
    writeFileSync(join(root, "y/AGENTS.md"), "y2\n");
    await store.settle(dirs);
    expect(await bodies(store, x)).toEqual(["x2\n"]);
    expect(await bodies(store, y)).toEqual(["y2\n"]);
    expect(log.lines.map((line) => line.message).join("\n")).toContain("could not look at");
  });

  test("past maxWatchedDirs, a chain directory replaced under an unwatched parent: its watched child is checked again in the same settle", async () => {
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "R\n", "a/b/AGENTS.md": "B1\n", "a/b/c/AGENTS.md": "C1\n" });
    // One watch only: the deepest directory gets it first, its parents are stat'd at every settle.
    const store = scratch.store(root, { maxWatchedDirs: 1 });
    const start = store.resolveStart(join(root, "a/b/c/x.ts"), true)!;
    const walk = store.walkOf(start);
    store.retain("s", walk);
    expect(await bodies(store, start)).toEqual(["R\n", "B1\n", "C1\n"]);
    await watchesStarted();
    await store.settle(new Set(walk));
    await Bun.sleep(QUIET_GAP_MS);
    await store.settle(new Set(walk));
    // a/b replaced by another directory with the same layout: c's watch followed the old one.
    scratch.write(root, { "a/b2/AGENTS.md": "B2\n", "a/b2/c/AGENTS.md": "C2\n" });
    renameSync(join(root, "a/b"), join(root, "a/b.old"));
    renameSync(join(root, "a/b2"), join(root, "a/b"));
    await store.settle(new Set(walk));
    expect(await bodies(store, store.resolveStart(join(root, "a/b/c/x.ts"), true)!)).toEqual(["R\n", "B2\n", "C2\n"]);
  });

  test("release(owner) unwatches what only that owner held", async () => {
    const { root, store, walk } = setUp();
    store.retain("t", [join(root, "a")]);
    await watchesStarted();
    expect(store.stats.watched).toBe(walk.length);
    await store.release("s");
    expect(store.stats.watched).toBe(1);
    await store.release("t");
    expect(store.stats).toMatchObject({ watched: 0, owners: 0 });
  });

  test("a release makes room: directories held while the store was full get their watches then (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "a1/x": "", "a2/x": "", "a3/x": "", "b1/x": "", "b2/x": "", "b3/x": "" });
    const store = scratch.store(root, { maxWatchedDirs: 3 });
    const dirs = (prefix: string) => [1, 2, 3].map((i) => join(root, `${prefix}${i}`));
    store.retain("a", dirs("a"));
    await watchesStarted();
    expect(store.stats.watched).toBe(3);
    // Held while the store is full: each directory's one watch start finds no room.
    store.retain("b", dirs("b"));
    await watchesStarted();
    expect(store.stats.watched).toBe(3);
    await store.release("a");
    await waitFor(() => store.stats.watched === 3, 2000, "b's directories watched");
    await store.release("b");
    expect(store.stats.watched).toBe(0);
  });

  test("the room a watched directory makes when it is deleted goes to a directory that waited for it", async () => {
    const root = scratch.dir();
    scratch.write(root, { "a1/x": "", "b1/x": "" });
    const store = scratch.store(root, { maxWatchedDirs: 1 });
    store.retain("a", [join(root, "a1")]);
    await watchesStarted();
    store.retain("b", [join(root, "b1")]);
    await watchesStarted();
    expect(store.stats.watched).toBe(1);
    rmSync(join(root, "a1"), { recursive: true });
    // The settle asks only for a1: b1 gets its watch from the room, not from a settle that reaches it.
    await waitFor(async () => {
      await store.settle(new Set([join(root, "a1")]), performance.now());
      return store.stats.watched === 1 ? true : undefined;
    }, 3000, "b1 watched once a1 is gone");
  });

  test("the room a release makes goes to directories that waited for it, not to one that can never be watched (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "real/x": "", "a1/x": "", "b1/x": "" });
    symlinkSync(join(root, "real"), join(root, "link"));
    const store = scratch.store(root, { maxWatchedDirs: 1 });
    // Held first: a symlinked directory, never watched (a watch would follow the link).
    store.retain("c", [join(root, "link")]);
    store.retain("a", [join(root, "a1")]);
    await watchesStarted();
    expect(store.stats.watched).toBe(1);
    store.retain("b", [join(root, "b1")]);
    await watchesStarted();
    await store.release("a");
    await waitFor(() => store.stats.watched === 1, 2000, "b1 watched");
  });

  test("maxWatchedDirs caps the watches", async () => {
    const { store, walk } = setUp({ maxWatchedDirs: 2 });
    await watchesStarted();
    expect(walk.length).toBeGreaterThan(2);
    expect(store.stats.watched).toBe(2);
  });

  test("the records stay within maxCacheBytes, least recently used evicted", async () => {
    const root = scratch.dir();
    const files: Record<string, string> = {};
    for (let i = 0; i < 200; i++) files[`d${i}/AGENTS.md`] = `${i}\n${noise(4000, i)}`;
    scratch.write(root, files);
    const maxCacheBytes = 64 * 1024;
    const store = scratch.store(root, { maxCacheBytes });
    for (let i = 0; i < 200; i++) {
      const chain = await store.chainOf(join(root, `d${i}`));
      expect(chain.at(-1)?.body.startsWith(`${i}\n`)).toBe(true);
      expect(store.stats.bytes).toBeLessThanOrEqual(maxCacheBytes);
    }
    expect(store.recordOf(join(root, "d0"))).toBeUndefined();
    expect(store.recordOf(join(root, "d199"))?.file?.body.startsWith("199\n")).toBe(true);
  });

  test("a held directory's record is kept past maxCacheBytes until its session lets go", async () => {
    const root = scratch.dir();
    const files: Record<string, string> = { "held/AGENTS.md": `held\n${noise(4000, 1000)}` };
    for (let i = 0; i < 100; i++) files[`d${i}/AGENTS.md`] = `${i}\n${noise(4000, i)}`;
    scratch.write(root, files);
    const store = scratch.store(root, { maxCacheBytes: 64 * 1024 });
    const held = join(root, "held");
    store.retain("s", [held]);
    await store.chainOf(held);
    for (let i = 0; i < 50; i++) await store.chainOf(join(root, `d${i}`));
    expect(store.recordOf(held)?.file?.body.startsWith("held\n")).toBe(true);
    await store.release("s");
    for (let i = 50; i < 100; i++) await store.chainOf(join(root, `d${i}`));
    expect(store.recordOf(held)).toBeUndefined();
    expect(store.stats.bytes).toBeLessThanOrEqual(64 * 1024);
  });

  for (const events of ["inotify", "fs.watch"] as const) test(`dispose leaves no watch and no temp directory (events: ${events}; inotify makes none)`, async () => {
    const sentinels = () => readdirSync(tmpdir()).filter((name) => name.startsWith("opencode-project-context-"));
    const before = sentinels();
    const { store, walk } = setUp({ events });
    await store.settle(walk);
    expect(store.stats.events).toBe(LINUX ? events : "fs.watch");
    expect(sentinels().length).toBe(before.length + (store.stats.events === "fs.watch" ? 1 : 0));
    store.dispose();
    expect(store.stats.watched).toBe(0);
    expect(sentinels()).toEqual(before);
    await store.settle(walk);
  });

  for (const events of ["inotify", "fs.watch"] as const) test(`no watcher keeps the process alive (events: ${events})`, () => {
    const script = `
      import { FileStore } from ${JSON.stringify(join(import.meta.dir, "../../plugin/files/store.ts"))};
      const store = new FileStore({ worktree: process.argv[2], fileNames: ["AGENTS.md"], maxFileBytes: 1024, maxDepth: 10, watch: true, events: "${events}", maxWatchedDirs: 10, log: { log() {}, once() {} } });
      store.retain("s", [process.argv[2]]);
      await store.settle([process.argv[2]]);
      await new Promise((resolve) => setImmediate(resolve));
      console.log("settled", store.stats.watched, store.stats.events);
    `;
    const root = scratch.dir();
    writeFileSync(join(root, "child.ts"), script);
    const before = new Set(readdirSync(tmpdir()));
    const child = spawnSync(process.execPath, [join(root, "child.ts"), root], { timeout: 10_000, encoding: "utf8" });
    // The child never disposed: its sentinel directory is left behind.
    for (const name of readdirSync(tmpdir())) if (!before.has(name) && name.startsWith("opencode-project-context-")) rmSync(join(tmpdir(), name), { recursive: true });
    expect(child.stdout + child.stderr).toContain(`settled 1 ${LINUX ? events : "fs.watch"}`);
    expect(child.status).toBe(0);
  });

  test("problems are logged once per file, as warnings naming the file", async () => {
    const log = recordingLogger();
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "---\nroot: true\ndescription: a: b\n---\nbody\n" });
    writeFileSync(join(root, "CLAUDE.md"), new Uint8Array([0]));
    mkdirSync(join(root, "sub"));
    writeFileSync(join(root, "sub/AGENTS.md"), new Uint8Array([0]));
    const store = scratch.store(root, { log });
    await store.chainOf(join(root, "sub"));
    await store.settle([root, join(root, "sub")]);
    await store.settle([root, join(root, "sub")]);
    expect(log.lines.map((line) => line.level)).toEqual(["warn", "warn"]);
    expect(log.lines.map((line) => line.message).join("\n")).toContain(join(root, "sub/AGENTS.md"));
    expect(log.lines.map((line) => line.message).join("\n")).toContain(`${join(root, "AGENTS.md")}: its frontmatter was dropped`);
  });
});

test.skipIf(!LINUX)("a file named like its directory (the binary `go build` writes into the module's root) is an entry, not the directory going: no structure pass (inotify tells them apart; found in review)", async () => {
  const root = scratch.dir();
  scratch.write(root, { "AGENTS.md": "r\n", "a/AGENTS.md": "a\n", "a/b/AGENTS.md": "b\n" });
  const store = scratch.store(root);
  const start = store.resolveStart(join(root, "a/b/x.ts"), true)!;
  const walk = new Set(store.walkOf(start));
  store.retain("s", walk);
  await store.chainOf(start);
  await watchesStarted();
  await store.settle(walk);
  // Past the racy window of the reads: from here on only events make a directory due.
  await Bun.sleep(RACY_MS + 10);
  await store.settle(walk);
  const before = store.generation;
  for (let i = 0; i < 3; i++) {
    writeFileSync(join(root, basename(root)), `binary ${i}\n`);
    writeFileSync(join(root, "a/a"), `binary ${i}\n`);
    await store.settle(walk);
  }
  // Each was a structure pass over everything below the directory (every watch closed and started
  // again, every record stat'd): 0.77 s of settle and a 261 ms task at 20,000 held directories.
  expect(store.generation).toBe(before);
  writeFileSync(join(root, "a/AGENTS.md"), "a, edited\n");
  await store.settle(walk);
  expect(await bodies(store, start)).toEqual(["r\n", "a, edited\n", "b\n"]);
  // The directory itself going is still a structure change.
  renameSync(join(root, "a"), join(root, "a.old"));
  scratch.write(root, { "a/AGENTS.md": "a2\n", "a/b/AGENTS.md": "b2\n" });
  await store.settle(walk);
  expect(await bodies(store, store.resolveStart(join(root, "a/b/x.ts"), true)!)).toEqual(["r\n", "a2\n", "b2\n"]);
});

describe("a file on a touched path (found in review)", () => {
  for (const watch of [true, false]) {
    test(`editing a file that lies on a touched path (it stays a file) moves no generation (watch ${watch})`, async () => {
      const root = scratch.dir();
      scratch.write(root, { "AGENTS.md": "r\n", "a/AGENTS.md": "a\n", "a/lib": "a file the agent edits\n", "a/other.ts": "x\n" });
      const store = scratch.store(root, { watch });
      const resolve = () => store.resolveStart(join(root, "a/lib/x.ts"), true)!;
      const start = resolve();
      expect(start).toBe(join(root, "a"));
      const walk = store.walkOf(start);
      store.retain("s", walk);
      await store.chainOf(start);
      await store.settle(new Set(walk));
      // Past the racy window of the reads: from here on only events make a directory due.
      await Bun.sleep(RACY_MS + 10);
      await store.settle(new Set(walk));
      // A control: editing a sibling file moves nothing.
      const before = store.generation;
      for (let i = 0; i < 3; i++) {
        writeFileSync(join(root, "a/other.ts"), `edit ${i}\n`);
        resolve();
        await store.settle(new Set(walk));
      }
      expect(store.generation).toBe(before);
      // The file on the touched path, edited the same way (the engine resolves its touches again at each step).
      for (let i = 0; i < 5; i++) {
        writeFileSync(join(root, "a/lib"), `edit ${i}\n`);
        resolve();
        await store.settle(new Set(walk));
      }
      expect(store.generation).toBe(before);
    });
  }
});
