import { afterEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { cpSync, existsSync, linkSync, mkdirSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { parseFrontmatter } from "../../plugin/files/frontmatter.ts";
import { Catalog, textMayLoad } from "../../plugin/rules/catalog.ts";
import { readContract } from "../../plugin/rules/contract.ts";
import { statPrint } from "../../plugin/paths.ts";
import { recordingLogger, Scratch } from "../files/helpers.ts";
import { waitFor } from "../helpers/harness.ts";

const scratch = new Scratch();
const catalogs: Catalog[] = [];
afterEach(() => {
  for (const catalog of catalogs.splice(0)) catalog.dispose();
  scratch.cleanup();
});
const HEAD = 4096;

/** What a watch reports of `path`, then the refresh that reads it. */
async function heardNow(catalog: Catalog, path: string): Promise<void> {
  catalog.heard(path);
  await catalog.refresh();
}

async function build(worktree: string, maxFileBytes = 128 * 1024, watch = false): Promise<Catalog> {
  const catalog = await Catalog.build({
    worktree,
    fileNames: ["AGENTS.md", "CLAUDE.md"],
    rules: [".opencode/rules/**/*.md"],
    maxEntries: 10_000,
    maxFileBytes,
    watch,
    log: recordingLogger(),
  });
  catalogs.push(catalog);
  return catalog;
}

/** Worktree-relative path → include mode, of every entry. */
function modes(catalog: Catalog): Record<string, string> {
  return Object.fromEntries([...catalog.all].map((entry) => [entry.file.rel, entry.contract.include]));
}

const block = (yaml: string) => `---\n${yaml}\n---\n`;

describe("catalog: which context files are entries", () => {
  test("always, agent and manual files are; touched and plain files are not; rule files apply always unless they say", async () => {
    const root = scratch.dir();
    scratch.write(root, {
      "a/AGENTS.md": `${block("include: always")}# a\n`,
      "b/AGENTS.md": `${block("include: agent\ndescription: payments")}# b\n`,
      "c/CLAUDE.md": `${block("alwaysApply: false")}# c (Cursor's manual)\n`,
      "d/AGENTS.md": `${block("include: touched")}# d\n`,
      "e/AGENTS.md": `${block("description: no mode")}# e\n`,
      "f/AGENTS.md": "# f\nno frontmatter at all\n",
      "g/AGENTS.md": "--- a rule, not frontmatter\ninclude: always\n",
      ".opencode/rules/plain.md": "# rule\n",
      ".opencode/rules/touched.md": `${block("include: touched\npaths: src/**")}# rule\n`,
      // Cursor's rule modes, and a bad value (as if absent: a rule file then applies always). Found in review.
      ".opencode/rules/cursor-manual.md": `${block("alwaysApply: false")}# rule\n`,
      ".opencode/rules/cursor-agent.md": `${block("alwaysApply: false\ndescription: payments")}# rule\n`,
      ".opencode/rules/bad-include.md": `${block("include:")}# rule\n`,
      // Empty as the contract reads it (a blank string, an empty list): a rule file without a mode too. Found in review.
      ".opencode/rules/blank-include.md": `${block('include: ""')}# rule\n`,
      ".opencode/rules/empty-list.md": `${block("alwaysApply: []")}# rule\n`,
      // A mode the contract takes with a warning (agent without a description) is a mode said; an unknown one is not.
      ".opencode/rules/agent-no-description.md": `${block("include: agent")}# rule\n`,
      ".opencode/rules/unknown-include.md": `${block("include: sometimes")}# rule\n`,
    });
    expect(modes(await build(root))).toEqual({
      "a/AGENTS.md": "always",
      "b/AGENTS.md": "agent",
      "c/CLAUDE.md": "manual",
      ".opencode/rules/plain.md": "always",
      ".opencode/rules/cursor-manual.md": "manual",
      ".opencode/rules/cursor-agent.md": "agent",
      ".opencode/rules/bad-include.md": "always",
      ".opencode/rules/blank-include.md": "always",
      ".opencode/rules/empty-list.md": "always",
      ".opencode/rules/agent-no-description.md": "agent",
      ".opencode/rules/unknown-include.md": "always",
    });
  });

  // Watched (inotify on Linux: events, and a stat only of what they may not tell of) and not (a stat of every entry).
  for (const watch of [false, true]) test(`a refresh vouches for changes saved before it began: a later \`since\` stats again and sees an edit made after it (watch: ${watch})`, async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": `${block("include: always")}# first\n` });
    const catalog = await build(root, undefined, watch);
    const path = join(root, "a/AGENTS.md");
    for (let i = 0; i < 20; i++) {
      const since = performance.now();
      await catalog.refresh(since);
      // A second call of the same step: nothing to do.
      await catalog.refresh(since);
      writeFileSync(path, `${block("include: always")}# edit ${i}\n`);
      await catalog.refresh(performance.now());
      expect(catalog.get(path)?.file.body).toBe(`# edit ${i}\n`);
    }
  });

  for (const watch of [false, true]) test(`an entry read within a timestamp tick of its change is read again at the next refresh (racy, as the store's records; watch: ${watch})`, async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": `${block("include: always")}# v0\n` });
    const catalog = await build(root, undefined, watch);
    const path = join(root, "a/AGENTS.md");
    // Kernels before Linux 6.13 (coarse timestamps) can give a same-size edit made in the same tick the stat this read saw.
    writeFileSync(path, `${block("include: always")}# v1\n`);
    await catalog.refresh(performance.now());
    expect(catalog.get(path)?.file.body).toBe("# v1\n");
    expect(catalog.get(path)?.print).not.toBe(statPrint(path));
    await Bun.sleep(60);
    await catalog.refresh(performance.now());
    expect(catalog.get(path)?.print).toBe(statPrint(path));
  });

  for (const watch of [false, true]) test(`a change stat sees but the bytes do not (a touch) is read once, not at every refresh (found in review; watch: ${watch})`, async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": `${block("include: always")}# a\n` });
    const catalog = await build(root, undefined, watch);
    const path = join(root, "a/AGENTS.md");
    const version = catalog.version;
    utimesSync(path, new Date(), new Date(Date.now() + 5_000));
    // Past the racy window of the touch's ctime: read once, and its stat kept.
    await Bun.sleep(60);
    await catalog.refresh();
    expect(catalog.get(path)?.print).toBe(statPrint(path));
    expect(catalog.version).toBe(version);
  });

  test("a deleted candidate leaves the index's files, and its entry goes (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": `${block("include: always")}# a\n`, "b/AGENTS.md": "# b\n" });
    const catalog = await build(root);
    expect(catalog.index?.files).toEqual(["a/AGENTS.md", "b/AGENTS.md"]);
    for (const rel of ["a/AGENTS.md", "b/AGENTS.md"]) {
      rmSync(join(root, rel));
      await heardNow(catalog, join(root, rel));
    }
    expect(catalog.index?.files).toEqual([]);
    expect(modes(catalog)).toEqual({});
  });

  test("a directory bearing an entry's name is never listed: its events keep what is listed under it, and its deletion takes that", async () => {
    const root = scratch.dir();
    scratch.write(root, { "x/AGENTS.md": "# x\n", "d/AGENTS.md/CLAUDE.md": "# inside a directory named AGENTS.md\n", ".opencode/rules/set.md/inner.md": "# a rule\n" });
    const catalog = await build(root);
    const listed = ["d/AGENTS.md/CLAUDE.md", ".opencode/rules/set.md/inner.md", "x/AGENTS.md"];
    expect([...(catalog.index?.files ?? [])].sort()).toEqual([...listed].sort());
    // What a watch reports when such a directory is made or changed.
    for (const rel of ["d/AGENTS.md", ".opencode/rules/set.md"]) await heardNow(catalog, join(root, rel));
    expect([...(catalog.index?.files ?? [])].sort()).toEqual([...listed].sort());
    // Deleted whole, with no event for what was in it: what was listed under it leaves.
    for (const rel of ["d/AGENTS.md", ".opencode/rules/set.md"]) {
      rmSync(join(root, rel), { recursive: true });
      await heardNow(catalog, join(root, rel));
    }
    expect(catalog.index?.files).toEqual(["x/AGENTS.md"]);
  });

  test("a path that changes kind (a file made a directory and back, one git lists as both) leaves nothing stale in the index (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "x/AGENTS.md": "# x\n", "d/AGENTS.md": "# d\n", "e/AGENTS.md/CLAUDE.md": "# e\n" });
    const git = (...args: string[]) => expect(spawnSync("git", args, { cwd: root }).status).toBe(0);
    git("init", "-q");
    git("add", "-A");
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "files");
    // Committed as a file, a directory on disk now: git lists the file and what the directory holds.
    rmSync(join(root, "d/AGENTS.md"));
    scratch.write(root, { "d/AGENTS.md/CLAUDE.md": "# inside d\n" });
    const catalog = await build(root);
    const files = () => [...(catalog.index?.files ?? [])].sort();
    expect(files()).toEqual(["d/AGENTS.md", "d/AGENTS.md/CLAUDE.md", "e/AGENTS.md/CLAUDE.md", "x/AGENTS.md"]);
    await heardNow(catalog, join(root, "d/AGENTS.md"));
    expect(files()).toEqual(["d/AGENTS.md/CLAUDE.md", "e/AGENTS.md/CLAUDE.md", "x/AGENTS.md"]);
    // Moved away whole (no event for what it held), and a directory replaced by a file.
    renameSync(join(root, "d/AGENTS.md"), join(root, "moved"));
    await heardNow(catalog, join(root, "d/AGENTS.md"));
    rmSync(join(root, "e/AGENTS.md"), { recursive: true });
    writeFileSync(join(root, "e/AGENTS.md"), "# e, a file now\n");
    await heardNow(catalog, join(root, "e/AGENTS.md"));
    expect(files()).toEqual(["e/AGENTS.md", "x/AGENTS.md"]);
    rmSync(join(root, "e/AGENTS.md"));
    await heardNow(catalog, join(root, "e/AGENTS.md"));
    expect(files()).toEqual(["x/AGENTS.md"]);
  });

  test("a folder of rule files moved away (no event names its files) leaves the index too, with inotify (found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { ".opencode/rules/top.md": "# top\n", ".opencode/rules/sub/x.md": "# x\n", ".opencode/rules/sub/y.md": "# y\n" });
    const catalog = await build(root, undefined, true);
    expect([...(catalog.index?.files ?? [])].sort()).toEqual([".opencode/rules/sub/x.md", ".opencode/rules/sub/y.md", ".opencode/rules/top.md"]);
    renameSync(join(root, ".opencode/rules/sub"), join(scratch.dir(), "sub"));
    await waitFor(async () => {
      await catalog.refresh();
      return catalog.index?.files.length === 1;
    }, 3_000, "the moved rule files leaving the index");
    expect(catalog.index?.files).toEqual([".opencode/rules/top.md"]);
    expect([...catalog.all].map((entry) => entry.file.rel)).toEqual([".opencode/rules/top.md"]);
  });

  test("a mode spelled without its key's letters (an escape, a YAML tag) is still found", async () => {
    const root = scratch.dir();
    scratch.write(root, {
      "escape/AGENTS.md": `${block('"incl\\x75de": always')}# escape\n`,
      "broken-line/AGENTS.md": `${block('? "incl\\\n  ude"\n: manual')}# a key over two lines, joined by an escaped line break\n`,
      "tag/AGENTS.md": `${block("? !!binary aW5jbHVkZQ==\n: always")}# binary key\n`,
      "alias/AGENTS.md": `${block("<<: {include: agent}\ndescription: merged")}# merge key\n`,
    });
    expect(modes(await build(root))).toEqual({ "escape/AGENTS.md": "always", "broken-line/AGENTS.md": "manual", "tag/AGENTS.md": "always", "alias/AGENTS.md": "agent" });
  });

  test("frontmatter longer than the head: the mode is read from the whole file", async () => {
    const root = scratch.dir();
    const pad = `notes: "${"x".repeat(HEAD)}"`;
    scratch.write(root, {
      "mode-after/AGENTS.md": `${block(`${pad}\ninclude: always`)}# mode past the head\n`,
      "mode-before/AGENTS.md": `${block(`include: manual\n${pad}`)}# block closing past the head\n`,
      "no-mode/AGENTS.md": `${block(`description: long\n${pad}`)}# long, touched\n`,
      "not-closed/AGENTS.md": `---\n${pad}\ninclude: always\n# never closed: all content\n`,
    });
    expect(modes(await build(root))).toEqual({ "mode-after/AGENTS.md": "always", "mode-before/AGENTS.md": "manual" });
  });

  test("a head cut inside a multi-byte character is read on; a head that is binary or not UTF-8 is no entry", async () => {
    const root = scratch.dir();
    const always = block("include: always");
    scratch.write(root, { "cut/AGENTS.md": `${always}${"a".repeat(HEAD - always.length - 1)}€ and the rest\n` });
    mkdirSync(join(root, "latin1"));
    writeFileSync(join(root, "latin1/AGENTS.md"), Buffer.concat([Buffer.from(always), Buffer.from([0xe9, 0x0a])]));
    mkdirSync(join(root, "nul"));
    writeFileSync(join(root, "nul/AGENTS.md"), Buffer.concat([Buffer.from(always), Buffer.from([0x00, 0x0a])]));
    expect(modes(await build(root))).toEqual({ "cut/AGENTS.md": "always" });
  });

  test("hostile candidates are refused without a hang: links out (file, directory on the way), a FIFO, a directory named AGENTS.md", async () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    const always = `${block("include: always")}OUTSIDE\n`;
    scratch.write(outside, { "AGENTS.md": always, "deep/AGENTS.md": always });
    scratch.write(root, { "inside/AGENTS.md": `${block("include: always")}inside\n` });
    mkdirSync(join(root, "file-link"));
    symlinkSync(join(outside, "AGENTS.md"), join(root, "file-link/AGENTS.md"));
    symlinkSync(outside, join(root, "dir-link"));
    mkdirSync(join(root, "fifo"));
    expect(spawnSync("mkfifo", [join(root, "fifo/AGENTS.md")]).status).toBe(0);
    mkdirSync(join(root, "dir/AGENTS.md"), { recursive: true });
    const catalog = await build(root);
    // What a watch would report: each is considered as a listed file is.
    for (const rel of ["file-link/AGENTS.md", "dir-link/AGENTS.md", "dir-link/deep/AGENTS.md", "fifo/AGENTS.md", "dir/AGENTS.md"]) await heardNow(catalog, join(root, rel));
    expect(modes(catalog)).toEqual({ "inside/AGENTS.md": "always" });
    for (const entry of catalog.all) expect(entry.file.raw).not.toContain("OUTSIDE");
  });

  for (const watch of [false, true]) test(`an entry whose file is replaced by a symlink out is dropped when read again, not followed (watch: ${watch})`, async () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    scratch.write(outside, { "AGENTS.md": `${block("include: always")}OUTSIDE\n` });
    scratch.write(root, { "a/AGENTS.md": `${block("include: always")}inside\n` });
    const catalog = await build(root, undefined, watch);
    expect(modes(catalog)).toEqual({ "a/AGENTS.md": "always" });
    rmSync(join(root, "a/AGENTS.md"));
    symlinkSync(join(outside, "AGENTS.md"), join(root, "a/AGENTS.md"));
    await catalog.refresh();
    expect(modes(catalog)).toEqual({});
  });
});

test("watch false: a rule directory replaced by a symlink leading out of the worktree is not listed (found in review: its 2,000 names entered the index at every refresh)", async () => {
  const root = scratch.dir();
  const outside = scratch.dir();
  for (let i = 0; i < 2000; i++) writeFileSync(join(outside, `n${i}.md`), `${block("include: always")}OUTSIDE\n`);
  scratch.write(root, { ".opencode/rules/r.md": "RULE\n", "AGENTS.md": "# r\n" });
  const catalog = await build(root);
  await catalog.refresh(performance.now());
  rmSync(join(root, ".opencode/rules"), { recursive: true });
  symlinkSync(outside, join(root, ".opencode/rules"));
  for (let i = 0; i < 3; i++) await catalog.refresh(performance.now());
  expect(catalog.index?.files.filter((rel) => rel.startsWith(".opencode/rules/n"))).toEqual([]);
  expect([...catalog.all].map((entry) => entry.file.rel)).toEqual([]);
});

describe("catalog: freshness with inotify (Linux)", () => {
  const LINUX = process.platform === "linux";
  const always = (text: string) => `${block("include: always")}${text}\n`;

  test.skipIf(!LINUX)("a refresh stats only what events may not tell of: once after a read, then nothing while nothing changes", async () => {
    const root = scratch.dir();
    const files: Record<string, string> = {};
    for (let i = 0; i < 299; i++) files[`p${i}/AGENTS.md`] = always(`# p${i}`);
    files[".opencode/rules/first.md"] = "# the first rule\n";
    scratch.write(root, files);
    // Past the racy window (an entry read within it is stat'd until it is past).
    await Bun.sleep(60);
    const catalog = await build(root, undefined, true);
    expect([...catalog.all]).toHaveLength(300);
    await catalog.refresh(performance.now());
    // Each entry once: its directory's watch began after its read.
    expect(catalog.refreshStats).toBe(300);
    for (let i = 0; i < 5; i++) await catalog.refresh(performance.now());
    expect(catalog.refreshStats).toBe(300);
    // An edit, a deletion and a new rule file, each saved before a refresh, are in it.
    writeFileSync(join(root, "p7/AGENTS.md"), always("# p7 edited"));
    rmSync(join(root, "p8/AGENTS.md"));
    scratch.write(root, { ".opencode/rules/new.md": "# a rule\n" });
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "p7/AGENTS.md"))?.file.body).toBe("# p7 edited\n");
    expect(catalog.get(join(root, "p8/AGENTS.md"))).toBeUndefined();
    expect(catalog.get(join(root, ".opencode/rules/new.md"))?.contract.include).toBe("always");
    // Only what was read again is stat'd (once or twice each), never the other 297.
    expect(catalog.refreshStats - 300).toBeLessThanOrEqual(4);
  });

  test.skipIf(!LINUX)("a steady refresh stats nothing, however many directories hold entries: their ancestors are watched, so no directory's identity is checked", async () => {
    const root = scratch.dir();
    const files: Record<string, string> = {};
    for (let i = 0; i < 40; i++) files[`p${i}/AGENTS.md`] = always(`# p${i}`);
    for (let i = 0; i < 60; i++) files[`.opencode/rules/t${i}/r.md`] = `${block("include: touched")}# touched ${i}\n`;
    scratch.write(root, files);
    await Bun.sleep(60);
    const catalog = await build(root, undefined, true);
    expect([...catalog.all]).toHaveLength(40);
    await catalog.refresh(performance.now());
    const [stats, checks] = [catalog.refreshStats, catalog.dirChecks];
    for (let i = 0; i < 3; i++) await catalog.refresh(performance.now());
    // Before their ancestors were watched: one identity stat per directory holding an entry, at every refresh (3 * 40 here).
    expect([catalog.refreshStats - stats, catalog.dirChecks - checks]).toEqual([0, 0]);
  });

  // Found by a review of the ancestors' watches: a deleted tree takes its deepest directories first,
  // and the ancestors watched as guards pushed them out of the 256 kept to be watched again.
  for (const [count, under] of [[200, "docs"], [60, "src/lib/x/docs"]] as const) {
    test.skipIf(!LINUX)(`a tree of ${count} entry directories (${under.split("/").length + 2} levels) deleted and checked out again: every always file is back`, async () => {
      const root = scratch.dir();
      const files: Record<string, string> = {};
      for (let i = 0; i < count; i++) files[`packages/p${i}/${under}/AGENTS.md`] = always(`# p${i}`);
      scratch.write(root, files);
      await Bun.sleep(60);
      const catalog = await build(root, undefined, true);
      await catalog.refresh(performance.now());
      expect([...catalog.all]).toHaveLength(count);
      renameSync(join(root, "packages"), join(root, "backup"));
      cpSync(join(root, "backup"), join(root, "saved"), { recursive: true });
      rmSync(join(root, "backup"), { recursive: true });
      await catalog.refresh(performance.now());
      expect([...catalog.all]).toHaveLength(0);
      cpSync(join(root, "saved"), join(root, "packages"), { recursive: true });
      for (let i = 0; i < 3; i++) await catalog.refresh(performance.now());
      expect([...catalog.all]).toHaveLength(count);
    });
  }

  // Found by a second review: a guard dropped from the gone list was never watched again.
  for (const overflow of [false, true]) test.skipIf(!LINUX)(`an ancestor watched as a guard replaced under its kept child${overflow ? " after a queue overflow" : ""}, then renamed: the child's always file leaves the catalog`, async () => {
    const root = scratch.dir();
    scratch.write(root, { "pk/foo/AGENTS.md": always("# foo"), "other/AGENTS.md": always("# o") });
    await Bun.sleep(60);
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    await catalog.refresh(performance.now());
  // All synchronous (no idle drain in between): the kernel's queue (16,384 events) overflows first.
    if (overflow) for (let i = 0; i < 7000; i++) writeFileSync(join(root, "pk", `n${i}.txt`), "x");
  // pk is swapped for a new directory holding the same foo (same inode): a tool's atomic replace.
    mkdirSync(join(root, "pk.new"));
    renameSync(join(root, "pk/foo"), join(root, "pk.new/foo"));
    renameSync(join(root, "pk"), join(root, "pk.old"));
    renameSync(join(root, "pk.new"), join(root, "pk"));
    await catalog.refresh(performance.now());
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "pk/foo/AGENTS.md"))?.file.body).toBe("# foo\n");
    renameSync(join(root, "pk"), join(root, "moved"));
    await catalog.refresh(performance.now());
    await catalog.refresh(performance.now());
    expect(existsSync(join(root, "pk/foo/AGENTS.md"))).toBe(false);
    expect(catalog.get(join(root, "pk/foo/AGENTS.md"))?.file.body).toBeUndefined();
  }, 30_000);

  test.skipIf(!LINUX)("an ancestor three levels up renamed, a copy put back and edited: the copy's edits are seen, and the steady refreshes after stat nothing again", async () => {
    const root = scratch.dir();
    scratch.write(root, { "top/mid/low/leaf/AGENTS.md": always("# v1"), "top/mid/other/AGENTS.md": always("# o1"), "elsewhere/AGENTS.md": always("# e") });
    await Bun.sleep(60);
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    renameSync(join(root, "top/mid"), join(root, "top/mid.bak"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "top/mid/low/leaf/AGENTS.md"))).toBeUndefined();
    expect(catalog.get(join(root, "top/mid/other/AGENTS.md"))).toBeUndefined();
    cpSync(join(root, "top/mid.bak"), join(root, "top/mid"), { recursive: true });
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "top/mid/low/leaf/AGENTS.md"))?.file.body).toBe("# v1\n");
    for (let i = 2; i < 4; i++) {
      writeFileSync(join(root, "top/mid/low/leaf/AGENTS.md"), always(`# v${i}`));
      writeFileSync(join(root, "top/mid.bak/low/leaf/AGENTS.md"), always(`# old copy ${i}`));
      await catalog.refresh(performance.now());
      expect(catalog.get(join(root, "top/mid/low/leaf/AGENTS.md"))?.file.body).toBe(`# v${i}\n`);
    }
    await Bun.sleep(60);
    await catalog.refresh(performance.now());
    await catalog.refresh(performance.now());
    const [stats, checks] = [catalog.refreshStats, catalog.dirChecks];
    for (let i = 0; i < 3; i++) await catalog.refresh(performance.now());
    expect([catalog.refreshStats - stats, catalog.dirChecks - checks]).toEqual([0, 0]);
  });

  test.skipIf(!LINUX)("an entry that is a symlink to a file in another directory is stat'd at every refresh (its target's directory is not watched)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "shared/rules.md": always("# v1"), "other/AGENTS.md": always("# other") });
    mkdirSync(join(root, "a"));
    symlinkSync(join(root, "shared/rules.md"), join(root, "a/AGENTS.md"));
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    for (let i = 2; i < 6; i++) {
      writeFileSync(join(root, "shared/rules.md"), always(`# v${i}`));
      await catalog.refresh(performance.now());
      expect(catalog.get(join(root, "a/AGENTS.md"))?.file.body).toBe(`# v${i}\n`);
    }
  });

  for (const watch of [true, false]) test.skipIf(watch && !LINUX)(`an entry that is a symlink whose target goes (a branch without it) comes back with its target, with no event where the link is (watch: ${watch}; found in review)`, async () => {
    const root = scratch.dir();
    scratch.write(root, { "shared/rules.md": always("# v1"), "other/AGENTS.md": always("# other"), ".opencode/rules/x.md": "# x\n" });
    mkdirSync(join(root, "a"));
    symlinkSync(join(root, "shared/rules.md"), join(root, "a/AGENTS.md"));
    symlinkSync(join(root, "shared/rules.md"), join(root, ".opencode/rules/linked.md"));
    const catalog = await build(root, undefined, watch);
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "a/AGENTS.md"))?.file.body).toBe("# v1\n");
    rmSync(join(root, "shared/rules.md"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "a/AGENTS.md"))).toBeUndefined();
    expect(catalog.get(join(root, ".opencode/rules/linked.md"))).toBeUndefined();
    writeFileSync(join(root, "shared/rules.md"), always("# v2"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "a/AGENTS.md"))?.file.body).toBe("# v2\n");
    expect(catalog.get(join(root, ".opencode/rules/linked.md"))?.file.body).toBe("# v2\n");
  });

  // Each found by a helper's review of the first version (which had the old code's stat of every entry to live up to).
  test.skipIf(!LINUX)("an ancestor of a watched directory renamed and a copy put back: the copy's edits are seen (a watch follows its inode)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "pk/foo/AGENTS.md": always("# v1"), "other/AGENTS.md": always("# o") });
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    renameSync(join(root, "pk"), join(root, "pk.bak"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "pk/foo/AGENTS.md"))).toBeUndefined();
    cpSync(join(root, "pk.bak"), join(root, "pk"), { recursive: true });
    writeFileSync(join(root, "pk/foo/AGENTS.md"), always("# v2"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "pk/foo/AGENTS.md"))?.file.body).toBe("# v2\n");
    writeFileSync(join(root, "pk/foo/AGENTS.md"), always("# v3"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "pk/foo/AGENTS.md"))?.file.body).toBe("# v3\n");
  });

  test.skipIf(!LINUX)("CLAUDE.md a symlink to AGENTS.md beside it, or a hard link edited through another name: each edit is seen", async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": always("# v1"), "b/AGENTS.md": always("# h1"), "elsewhere/keep.txt": "x\n" });
    symlinkSync("AGENTS.md", join(root, "a/CLAUDE.md"));
    linkSync(join(root, "b/AGENTS.md"), join(root, "elsewhere/linked.md"));
    const catalog = await build(root, undefined, true);
    for (let i = 2; i < 4; i++) {
      // Past the racy window, and a refresh with nothing new: the entries are no longer stat'd for being new.
      await Bun.sleep(60);
      await catalog.refresh(performance.now());
      await catalog.refresh(performance.now());
      writeFileSync(join(root, "a/AGENTS.md"), always(`# v${i}`));
      writeFileSync(join(root, "elsewhere/linked.md"), always(`# h${i}`));
      await catalog.refresh(performance.now());
      expect(catalog.get(join(root, "a/CLAUDE.md"))?.file.body).toBe(`# v${i}\n`);
      expect(catalog.get(join(root, "b/AGENTS.md"))?.file.body).toBe(`# h${i}\n`);
    }
  });

  test.skipIf(!LINUX)("a file named like its directory is no sign the directory went; a rule directory moved away and back is watched again", async () => {
    const root = scratch.dir();
    scratch.write(root, { "server/AGENTS.md": always("# v1"), ".opencode/rules/team/a.md": "# a\n" });
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    writeFileSync(join(root, "server/server"), "a build's output\n");
    await catalog.refresh(performance.now());
    rmSync(join(root, "server/AGENTS.md"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "server/AGENTS.md"))).toBeUndefined();
    writeFileSync(join(root, "server/AGENTS.md"), always("# v3"));
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "server/AGENTS.md"))?.file.body).toBe("# v3\n");
    const team = join(root, ".opencode/rules/team");
    renameSync(team, `${team}.away`);
    await catalog.refresh(performance.now());
    renameSync(`${team}.away`, team);
    await catalog.refresh(performance.now());
    writeFileSync(join(team, "b.md"), "# b\n");
    await catalog.refresh(performance.now());
    expect(catalog.get(join(team, "b.md"))?.contract.include).toBe("always");
  });

  test.skipIf(!LINUX)("a watched directory deleted: its entries go at the next refresh; made again (on ext4, often on the same inode), its new files' edits are seen", async () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": always("# v1"), "b/AGENTS.md": always("# b") });
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    rmSync(join(root, "a"), { recursive: true });
    await catalog.refresh(performance.now());
    expect(modes(catalog)).toEqual({ "b/AGENTS.md": "always" });
    scratch.write(root, { "a/AGENTS.md": always("# v2") });
    await catalog.refresh(performance.now());
    expect(catalog.get(join(root, "a/AGENTS.md"))?.file.body).toBe("# v2\n");
    for (let i = 3; i < 5; i++) {
      await Bun.sleep(60);
      await catalog.refresh(performance.now());
      writeFileSync(join(root, "a/AGENTS.md"), always(`# v${i}`));
      await catalog.refresh(performance.now());
      expect(catalog.get(join(root, "a/AGENTS.md"))?.file.body).toBe(`# v${i}\n`);
    }
  });

  test.skipIf(!LINUX)("a refresh never throws, now or later, when a path an event named cannot be stat'd (its directory made a file, a symlink loop; found in review)", async () => {
    const root = scratch.dir();
    scratch.write(root, { "d/AGENTS.md": always("# d"), "e/AGENTS.md": always("# e"), "ok/AGENTS.md": always("# ok") });
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    writeFileSync(join(root, "d/AGENTS.md"), always("# d2"));
    writeFileSync(join(root, "e/AGENTS.md"), always("# e2"));
    rmSync(join(root, "d"), { recursive: true });
    writeFileSync(join(root, "d"), "now a file\n");
    rmSync(join(root, "e"), { recursive: true });
    symlinkSync("e", join(root, "e"));
    expect(await catalog.refresh(performance.now()).then(() => "refreshed")).toBe("refreshed");
    writeFileSync(join(root, "ok/AGENTS.md"), always("# ok2"));
    expect(await catalog.refresh(performance.now()).then(() => "refreshed")).toBe("refreshed");
    expect(modes(catalog)).toEqual({ "ok/AGENTS.md": "always" });
    expect(catalog.get(join(root, "ok/AGENTS.md"))?.file.body).toBe("# ok2\n");
  });

  test.skipIf(!LINUX)("a watched directory whose ancestor became a symlink leading out is neither watched nor listed there (found in review)", async () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    scratch.write(outside, { "foo/CLAUDE.md": always("OUTSIDE"), "foo/AGENTS.md": always("OUTSIDE") });
    scratch.write(root, { "pk/foo/AGENTS.md": always("# inside"), "other/AGENTS.md": always("# o") });
    const catalog = await build(root, undefined, true);
    await catalog.refresh(performance.now());
    renameSync(join(root, "pk"), join(root, "pk.bak"));
    symlinkSync(outside, join(root, "pk"));
    await catalog.refresh(performance.now());
    await catalog.refresh(performance.now());
    expect(catalog.index?.files).not.toContain("pk/foo/CLAUDE.md");
    expect([...catalog.all].map((entry) => entry.file.body).join("")).not.toContain("OUTSIDE");
  });

});

describe("catalog: what a file's head tells of its mode (textMayLoad)", () => {
  /**
   * Frontmatter-like text, mostly well formed: keys spelled plainly, escaped, tagged or merged, lists
   * below a key (`- a` lines), stray delimiters, both line ends, and a body that may repeat any of it.
   */
  const key = fc.constantFrom("include", "alwaysApply", '"incl\\x75de"', '"\\u0069nclude"', "'include'", "Include", "description", "globs", "root", "notes");
  const value = fc.constantFrom("always", "agent", "manual", "touched", "true", "false", "x", "[a, b]", "|\n  ---\n  include: always", '"a\\"');
  const line = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(key, value).map(([k, v]) => `${k}: ${v}`) },
    { weight: 2, arbitrary: fc.tuple(key, fc.constantFrom("\n- ", "\n  - ", "\n-\n  ")).map(([k, item]) => `${k}:${item}a`) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "? !!binary aW5jbHVkZQ==\n: always",
        "? !!binary YWx3YXlzQXBwbHk=\n: true",
        '? "incl\\\n  ude"\n: manual',
        "<<: {include: agent}",
        '{"\\u0069nclude": "agent", "description": "d"}',
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom("---", "----", "--- x", "-", "#", "") },
  );
  const fileText = fc
    .record({
      opening: fc.constantFrom("---", "---", "---", "--- ", "---yaml", "---json", "----", "--"),
      lines: fc.array(line, { maxLength: 6 }),
      end: fc.constantFrom("\n", "\r\n"),
      closing: fc.constantFrom("---", "---", "---", "--- ", "---x", "----", ""),
      body: fc.array(fc.constantFrom("text ", "include: always", "\n", "\n---\n", "é", "!", "\\"), { maxLength: 8 }),
    })
    .map(({ opening, lines, end, closing, body }) => [opening, ...lines, closing].join(end) + end + body.join(""));
  const modeOf = (text: string) => readContract(parseFrontmatter(text).frontmatter).include;
  /** The catalog before textMayLoad: a parse of every head with frontmatter, the file read whole unless the head tells. */
  const parsedHeadMayLoad = (head: string, truncated: boolean) => {
    const { frontmatter } = parseFrontmatter(head);
    const told = !truncated || Object.keys(frontmatter).length > 0;
    return !told || readContract(frontmatter).include !== "touched";
  };

  test("the same entries as a parse of every head: a head passed over unparsed belongs to a touched file", () => {
    fc.assert(
      fc.property(fileText, fc.nat(), fc.nat(), (text, headCut, readCut) => {
        const head = text.slice(0, headCut % (text.length + 1));
        const truncated = head.length < text.length;
        // The whole read stops at maxFileBytes: anywhere, even short of the head.
        const whole = text.slice(0, readCut % (text.length + 1));
        const entry = (mayLoad: boolean) => mayLoad && modeOf(whole) !== "touched";
        expect(entry(textMayLoad(head, truncated))).toBe(entry(parsedHeadMayLoad(head, truncated)));
        // Never a read more than before.
        if (!parsedHeadMayLoad(head, truncated)) expect(textMayLoad(head, truncated)).toBe(false);
      }),
      { numRuns: 10_000 },
    );
  });
});
