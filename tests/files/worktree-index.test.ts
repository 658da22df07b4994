import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import fc from "fast-check";
import picomatch from "picomatch";
import { contextNamesOf } from "../../plugin/files/names.ts";
import { buildWorktreeIndex, escapeWildmatch, MAX_DEPTH, NearIgnores, readIgnoreBasis, type IndexOptions, type WorktreeIndex } from "../../plugin/files/worktree-index.ts";

// ---- sandbox: temp trees, and a git that sees none of this machine's configuration ----

const made: string[] = [];
const savedEnv = { ...process.env };
let sandbox = "";

beforeAll(() => {
  sandbox = realpathSync(mkdtempSync(join(tmpdir(), "pc-index-env-")));
  const empty = join(sandbox, "gitconfig");
  writeFileSync(empty, "");
  Object.assign(process.env, {
    GIT_CONFIG_GLOBAL: empty,
    GIT_CONFIG_NOSYSTEM: "1",
    XDG_CONFIG_HOME: join(sandbox, "xdg"),
    // No repository above the temp directory may be found: a tree without .git is not a repository.
    GIT_CEILING_DIRECTORIES: realpathSync(tmpdir()),
  });
});

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

afterAll(() => {
  rmSync(sandbox, { recursive: true, force: true });
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
});

function tree(files: Record<string, string> = {}): string {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "pc-index-")));
  made.push(root);
  write(root, files);
  return root;
}

function write(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

function git(cwd: string, ...args: string[]): string {
  const run = spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`git ${args.join(" ")}: ${run.stderr}`);
  return run.stdout;
}

function gitInit(root: string): void {
  git(root, "init", "-q");
}

/**
 * git's own answer: which of `paths` (directories end in `/`, and exist) it ignores. Directories are
 * asked without their `/` (git sees they are directories): with it, check-ignore also applies the
 * directory's own .gitignore to the directory itself, which git's listing never does.
 */
function gitIgnored(root: string, paths: readonly string[]): Set<string> {
  const asked = paths.map((path) => path.replace(/\/$/, ""));
  const run = spawnSync("git", ["check-ignore", "--stdin", "-z"], { cwd: root, input: asked.join("\0"), encoding: "utf8" });
  if (run.status !== 0 && run.status !== 1) throw new Error(`git check-ignore: ${run.stderr}`);
  const ignored = new Set(run.stdout.split("\0").filter(Boolean));
  return new Set(paths.filter((_, i) => ignored.has(asked[i] ?? "")));
}

interface Logged {
  level: string;
  message: string;
}

async function build(worktree: string, options: Partial<IndexOptions> = {}): Promise<{ index: WorktreeIndex; logged: Logged[] }> {
  const logged: Logged[] = [];
  const index = await buildWorktreeIndex({
    worktree,
    fileNames: ["AGENTS.md", "CLAUDE.md"],
    rules: [".opencode/rules/**/*.md"],
    maxEntries: 200_000,
    log: (level, message) => void logged.push({ level, message }),
    ...options,
  });
  return { index, logged };
}

/** Every directory (with its `/`) and file of `paths`, for asking both sides the same questions. */
function everyPath(paths: readonly string[]): string[] {
  const all = new Set<string>();
  for (const path of paths) {
    all.add(path);
    for (let slash = path.indexOf("/"); slash !== -1; slash = path.indexOf("/", slash + 1)) all.add(path.slice(0, slash + 1));
  }
  return [...all].sort();
}

// ---- names ----

describe("contextNamesOf", () => {
  test("each name gives its override and local variants, extension replaced by .md", () => {
    expect(contextNamesOf(["AGENTS.md", "CLAUDE.md"])).toEqual({
      base: ["AGENTS.md", "CLAUDE.md"],
      override: ["AGENTS.override.md", "CLAUDE.override.md"],
      local: ["AGENTS.local.md", "CLAUDE.local.md"],
      replaces: new Map([["AGENTS.override.md", "AGENTS.md"], ["CLAUDE.override.md", "CLAUDE.md"]]),
    });
    expect(contextNamesOf(["CONTEXT", ".cursorrules", "notes.txt", "a.b.md"])).toEqual({
      base: ["CONTEXT", ".cursorrules", "notes.txt", "a.b.md"],
      override: ["CONTEXT.override.md", ".cursorrules.override.md", "notes.override.md", "a.b.override.md"],
      local: ["CONTEXT.local.md", ".cursorrules.local.md", "notes.local.md", "a.b.local.md"],
      // The override names the base it replaces: notes.override.md takes the place of notes.txt.
      replaces: new Map([["CONTEXT.override.md", "CONTEXT"], [".cursorrules.override.md", ".cursorrules"], ["notes.override.md", "notes.txt"], ["a.b.override.md", "a.b.md"]]),
    });
  });

  test("duplicates collapse; `AGENTS.md` and `AGENTS.txt` share their variants", () => {
    expect(contextNamesOf(["AGENTS.md", "AGENTS.md", "AGENTS.txt"])).toEqual({
      base: ["AGENTS.md", "AGENTS.txt"],
      override: ["AGENTS.override.md"],
      local: ["AGENTS.local.md"],
      replaces: new Map([["AGENTS.override.md", "AGENTS.md"]]),
    });
  });
});

// ---- the git listing ----

const MONOREPO = {
  ".gitignore": "node_modules/\ndist\n*.local.md\n",
  "AGENTS.md": "root",
  "CLAUDE.local.md": "mine",
  "apps/web/AGENTS.md": "tracked",
  "apps/web/AGENTS.override.md": "an override beside its base",
  "apps/api/CLAUDE.override.md": "an override with no base file",
  "apps/api/src/AGENTS.local.md": "an ignored local variant",
  "apps/new/AGENTS.md": "untracked, not ignored",
  "node_modules/x/AGENTS.md": "never",
  "node_modules/x/AGENTS.local.md": "never: in an ignored directory",
  "apps/web/dist/AGENTS.md": "never",
  "apps/web/dist/AGENTS.local.md": "never",
  ".opencode/rules/style.md": "rule",
  ".opencode/rules/team/.hidden/deep.md": "rule in a dot directory",
  ".opencode/rules/notes.txt": "not markdown",
  ".opencode/rules.md": "not under rules/",
  "docs/readme.md": "not a context file",
  "docs/AGENTS.md.bak": "not a context file",
};

const MONOREPO_FILES = [
  ".opencode/rules/style.md",
  ".opencode/rules/team/.hidden/deep.md",
  "AGENTS.md",
  "CLAUDE.local.md",
  "apps/api/CLAUDE.override.md",
  "apps/api/src/AGENTS.local.md",
  "apps/new/AGENTS.md",
  "apps/web/AGENTS.md",
  "apps/web/AGENTS.override.md",
];

describe("the git listing", () => {
  test("tracked, untracked, overrides, rules and ignored local variants; nothing in ignored directories", async () => {
    const root = tree(MONOREPO);
    gitInit(root);
    git(root, "add", ".gitignore", "AGENTS.md", "apps/web", ".opencode");
    // Tracked by force inside an ignored directory: still in node_modules, still never loaded.
    git(root, "add", "-f", "node_modules/x/AGENTS.md");
    git(root, "commit", "-qm", "init");
    const { index, logged } = await build(root);
    expect(index.source).toBe("git");
    expect(index.truncated).toBe(false);
    expect(index.files).toEqual(MONOREPO_FILES);
    // Sorted once and shared (typed readonly, not frozen: see FileStore.walkOf).
    expect(index.files).toBe(index.files);
    expect(logged).toEqual([]);
  });

  test("isIgnored: directories (trailing /), files, and what lies below an ignored directory", async () => {
    const root = tree(MONOREPO);
    gitInit(root);
    const { index } = await build(root);
    expect(index.isIgnored("node_modules/")).toBe(true);
    expect(index.isIgnored("node_modules/x/")).toBe(true);
    expect(index.isIgnored("node_modules/x/AGENTS.md")).toBe(true);
    expect(index.isIgnored("apps/web/dist/")).toBe(true);
    expect(index.isIgnored("apps/web/dist")).toBe(true); // `dist` has no slash: file or directory
    expect(index.isIgnored("apps/api/src/AGENTS.local.md")).toBe(true);
    expect(index.isIgnored("apps/")).toBe(false);
    expect(index.isIgnored("apps/web/AGENTS.md")).toBe(false);
    // `node_modules/` names directories only: a file of that name is not ignored (as for git).
    expect(index.isIgnored("lib/node_modules")).toBe(false);
    expect(index.isIgnored("lib/node_modules/")).toBe(true);
  });

  test("mayLoad: a local variant needs only its directory not to be ignored", async () => {
    const root = tree(MONOREPO);
    gitInit(root);
    const { index } = await build(root);
    expect(index.mayLoad("apps/api/src/AGENTS.local.md")).toBe(true);
    expect(index.mayLoad("node_modules/x/AGENTS.local.md")).toBe(false);
    expect(index.mayLoad("apps/web/dist/AGENTS.md")).toBe(false);
    expect(index.mayLoad("apps/web/AGENTS.md")).toBe(true);
    expect(index.mayLoad("not/yet/there/CLAUDE.override.md")).toBe(true);
    expect(index.mayLoad("apps/web/index.ts")).toBe(false);
    expect(index.mayLoad("apps/web/")).toBe(false);
  });

  test("nested .gitignore files with negations, re-including directories and files, agree with git", async () => {
    const files = {
      ".gitignore": "generated/\nscratch/*\n!scratch/keep/\n*.log\n",
      "packages/a/.gitignore": "!generated/\n",
      "packages/b/.gitignore": "*\n!*/\n!AGENTS.md\n",
      "generated/AGENTS.md": "",
      "packages/a/generated/AGENTS.md": "",
      "packages/a/generated/deep/CLAUDE.md": "",
      "packages/c/generated/AGENTS.md": "",
      "packages/b/AGENTS.md": "",
      "packages/b/CLAUDE.md": "",
      "packages/b/sub/AGENTS.md": "",
      "scratch/AGENTS.md": "",
      "scratch/keep/AGENTS.md": "",
      "scratch/other/AGENTS.md": "",
      "logs/AGENTS.md.log/AGENTS.md": "",
    };
    const root = tree(files);
    gitInit(root);
    const { index } = await build(root);
    expect(index.files).toEqual(["packages/a/generated/AGENTS.md", "packages/a/generated/deep/CLAUDE.md", "packages/b/AGENTS.md", "packages/b/sub/AGENTS.md", "scratch/keep/AGENTS.md"]);
    const paths = everyPath(Object.keys(files));
    const ignoredByGit = gitIgnored(root, paths);
    for (const path of paths) expect([path, index.isIgnored(path)]).toEqual([path, ignoredByGit.has(path)]);
  });

  test("a .gitignore that ignores itself (`*` in .venv/.gitignore) still applies", async () => {
    const root = tree({ ".venv/.gitignore": "*\n", ".venv/lib/pkg/AGENTS.md": "", ".venv/AGENTS.md": "", "AGENTS.md": "" });
    gitInit(root);
    const { index } = await build(root);
    expect(index.files).toEqual(["AGENTS.md"]);
    expect(index.isIgnored(".venv/lib/")).toBe(true);
    expect(index.isIgnored(".venv/")).toBe(false);
  });

  test("$GIT_DIR/info/exclude and core.excludesFile count, the deeper .gitignore first", async () => {
    const root = tree({ "a/AGENTS.md": "", "b/AGENTS.md": "", "c/AGENTS.md": "", "c/.gitignore": "!AGENTS.md\n" });
    gitInit(root);
    writeFileSync(join(root, ".git/info/exclude"), "a/\n");
    const excludes = join(root, ".git", "my-excludes");
    writeFileSync(excludes, "b/\nAGENTS.md\n");
    git(root, "config", "core.excludesFile", excludes);
    const { index } = await build(root);
    expect(index.files).toEqual(["c/AGENTS.md"]);
    expect([index.isIgnored("a/"), index.isIgnored("b/"), index.isIgnored("c/AGENTS.md")]).toEqual([true, true, false]);
  });

  test("core.ignoreCase is honoured", async () => {
    const root = tree({ ".gitignore": "BUILD/\n", "build/AGENTS.md": "" });
    gitInit(root);
    expect((await build(root)).index.files).toEqual(["build/AGENTS.md"]);
    git(root, "config", "core.ignoreCase", "true");
    expect((await build(root)).index.files).toEqual([]);
  });

  test("a relative core.excludesFile is read from the repository's top, as git reads it, when the worktree is below the top", async () => {
    const root = tree({ "my-excludes": "secret.txt\n", "sub/my-excludes": "decoy.txt\n", "sub/secret.txt": "", "sub/decoy.txt": "", "sub/AGENTS.md": "" });
    gitInit(root);
    git(root, "config", "core.excludesFile", "my-excludes");
    const worktree = join(root, "sub");
    const byGit = gitIgnored(worktree, ["secret.txt", "decoy.txt"]);
    expect([...byGit]).toEqual(["secret.txt"]);
    const { near, index } = await bothJudges(worktree);
    expect([index.isIgnored("secret.txt"), index.isIgnored("decoy.txt")]).toEqual([true, false]);
    write(worktree, { "secret-dir/AGENTS.md": "" });
    appendFileSync(join(root, "my-excludes"), "secret-dir/\n");
    expect(near.isIgnored("secret-dir/")).toBe(false); // NearIgnores read the list at start
    const again = await bothJudges(worktree);
    expect([again.near.isIgnored("secret-dir/"), again.index.isIgnored("secret-dir/")]).toEqual([true, true]);
  });

  test("a worktree inside a repository: paths relative to it, the .gitignore files above it apply", async () => {
    const root = tree({
      ".gitignore": "sub/ignored/\n*.local.md\n",
      "AGENTS.md": "outside the worktree",
      "sub/.gitignore": "private/\n",
      "sub/AGENTS.md": "",
      "sub/ignored/AGENTS.md": "",
      "sub/private/AGENTS.md": "",
      "sub/pkg/AGENTS.local.md": "",
      "sub/pkg/deep/CLAUDE.md": "",
      "other/AGENTS.md": "",
    });
    gitInit(root);
    git(root, "add", ".");
    git(root, "commit", "-qm", "init");
    const worktree = join(root, "sub");
    const { index } = await build(worktree);
    expect(index.source).toBe("git");
    expect(index.files).toEqual(["AGENTS.md", "pkg/AGENTS.local.md", "pkg/deep/CLAUDE.md"]);
    expect(index.isIgnored("ignored/")).toBe(true);
    expect(index.isIgnored("private/")).toBe(true);
    expect(index.isIgnored("pkg/AGENTS.local.md")).toBe(true);
    expect(index.isIgnored("pkg/")).toBe(false);
  });

  test("a nested repository (a clone, one inside it) is judged by its own rules: its .gitignore files, its info/exclude and core.excludesFile, not the outer repository's .gitignore or info/exclude; as git in it answers, and the walk agrees", async () => {
    const root = tree({
      ".gitignore": "outer-only/\n",
      "svc/.gitignore": ".env\nnode_modules/\n",
      "svc/.env": "",
      "svc/src/x.ts": "",
      "svc/node_modules/evil/AGENTS.md": "",
      "svc/outer-only/AGENTS.md": "",
      "svc/outer-excluded.md": "",
      "svc/excluded.md": "",
      "svc/user-ignored.md": "",
      "svc/pkg/.gitignore": "gen/\n",
      "svc/pkg/gen/AGENTS.md": "",
      "svc/pkg/AGENTS.md": "",
      "svc/inner/.gitignore": "secret.md\n",
      "svc/inner/secret.md": "",
      "svc/inner/.env": "",
      "svc/inner/AGENTS.md": "",
      "outer-excluded.md": "",
    });
    for (const repository of ["svc", "svc/inner"]) gitInit(join(root, repository));
    write(root, { "svc/.git/info/exclude": "excluded.md\n" });
    const walked = (await build(root)).index;
    gitInit(root);
    write(root, { ".git/info/exclude": "outer-excluded.md\n" });
    write(sandbox, { "xdg/git/ignore": "user-ignored.md\n" });
    try {
      const { index, logged } = await build(root);
      expect(index.source).toBe("git");
      expect(logged).toEqual([]);
      const paths = everyPath(["svc/.env", "svc/src/x.ts", "svc/node_modules/evil/AGENTS.md", "svc/outer-only/AGENTS.md", "svc/outer-excluded.md", "svc/excluded.md", "svc/user-ignored.md", "svc/pkg/gen/AGENTS.md", "svc/pkg/AGENTS.md", "svc/inner/secret.md", "svc/inner/.env", "svc/inner/AGENTS.md"]);
      // git's answer for each path comes from the innermost repository holding it (a repository's top is its parent's to judge).
      const repositoryOf = (path: string): string => ["svc/inner/", "svc/"].find((top) => path.startsWith(top) && path !== top) ?? "";
      for (const path of paths) {
        const top = repositoryOf(path);
        const byGit = gitIgnored(join(root, top), [path.slice(top.length)]).size === 1;
        expect([path, index.isIgnored(path)]).toEqual([path, byGit]);
        // The walk knows no core.excludesFile (git's configuration), and ran before the outer info/exclude was written.
        if (path !== "svc/user-ignored.md") expect([path, walked.isIgnored(path)]).toEqual([path, byGit]);
      }
      expect(paths.filter((path) => index.isIgnored(path))).toEqual([
        "svc/.env",
        "svc/excluded.md",
        "svc/inner/secret.md",
        "svc/node_modules/",
        "svc/node_modules/evil/",
        "svc/node_modules/evil/AGENTS.md",
        "svc/pkg/gen/",
        "svc/pkg/gen/AGENTS.md",
        "svc/user-ignored.md",
      ]);
      expect(index.isIgnored("outer-excluded.md")).toBe(true);
      // git lists no file of a nested repository: its context files load through the directories a session touches.
      expect(index.files).toEqual([]);
    } finally {
      rmSync(join(sandbox, "xdg"), { recursive: true });
    }
  });

  // Found in review (0.3.16; each failed before its fix): NearIgnores and the index must agree with git in both.
  /** What judges `root`'s paths before the catalog (NearIgnores, from git's settings) and after it (the index). */
  async function bothJudges(root: string): Promise<{ near: NearIgnores; index: WorktreeIndex }> {
    const basis = await readIgnoreBasis(root, () => {});
    if (!basis.ok) throw new Error(basis.why);
    return { near: new NearIgnores(root, basis, () => {}), index: (await build(root)).index };
  }

  test("an embedded repository `git add`ed without .gitmodules (a gitlink no pathspec matches) is judged by its own rules, by the index as by NearIgnores and git", async () => {
    const root = tree({ ".gitignore": "docs/\n", "AGENTS.md": "", "inner/docs/AGENTS.md": "inner docs", "inner/README": "" });
    git(join(root, "inner"), "init", "-q");
    git(join(root, "inner"), "add", ".");
    git(join(root, "inner"), "commit", "-qm", "i");
    git(root, "init", "-q");
    git(root, "add", ".");
    git(root, "commit", "-qm", "o");
    expect(spawnSync("git", ["check-ignore", "-q", "docs"], { cwd: join(root, "inner") }).status).toBe(1);
    const { near, index } = await bothJudges(root);
    expect(index.source).toBe("git");
    expect(near.isIgnored("inner/docs/")).toBe(false);
    expect(index.isIgnored("inner/docs/")).toBe(false);
    expect(index.isIgnored("docs/")).toBe(true);
  });

  test("a directory whose `.git` is no repository to git (an empty `.git` directory, a `.git` file that is no gitfile, a gitfile leading nowhere) is a plain directory: the outer rules judge it, by the index, NearIgnores and the walk, as git does", async () => {
    const files: Record<string, string> = { ".gitignore": ".env\n*.pem\n", "AGENTS.md": "" };
    for (const dir of ["emptydir", "garbage", "stale", "real"]) Object.assign(files, { [`${dir}/.env`]: "SECRET=1", [`${dir}/key.pem`]: "", [`${dir}/AGENTS.md`]: "" });
    const root = tree({ ...files, "garbage/.git": "not a gitfile\n", "stale/.git": "gitdir: ../moved-away/.git\n" });
    mkdirSync(join(root, "emptydir/.git"));
    gitInit(join(root, "real"));
    const walked = (await build(root)).index;
    gitInit(root);
    const { near, index } = await bothJudges(root);
    expect(index.source).toBe("git");
    for (const dir of ["emptydir", "garbage", "stale"]) {
      const paths = [`${dir}/`, `${dir}/.env`, `${dir}/key.pem`, `${dir}/AGENTS.md`];
      const byGit = gitIgnored(root, paths);
      expect([...byGit]).toEqual([`${dir}/.env`, `${dir}/key.pem`]);
      for (const path of paths) {
        expect([path, index.isIgnored(path)]).toEqual([path, byGit.has(path)]);
        expect([path, walked.isIgnored(path)]).toEqual([path, byGit.has(path)]);
      }
      expect(near.isIgnored(`${dir}/`)).toBe(false);
    }
    // git lists their files as its own; a real nested repository stays judged by its own rules.
    expect(index.files).toEqual(["AGENTS.md", "emptydir/AGENTS.md", "garbage/AGENTS.md", "stale/AGENTS.md"]);
    expect(walked.files).toEqual(index.files);
    expect([index.isIgnored("real/.env"), walked.isIgnored("real/.env")]).toEqual([false, false]);
  });

  test("a `.git` git itself reads through (a symlink to a file that is no gitfile, a directory whose HEAD is no ref, a commondir leading nowhere) is no repository either: the outer rules judge it, as git does (found in review)", async () => {
    const files: Record<string, string> = { ".gitignore": ".env\n", "AGENTS.md": "", "linked-gitfile": "not a gitfile\n" };
    for (const dir of ["linked", "junkhead", "common"]) Object.assign(files, { [`${dir}/.env`]: "SECRET=1", [`${dir}/AGENTS.md`]: "" });
    Object.assign(files, { "junkhead/.git/HEAD": "junk\n", "common/.git/HEAD": "ref: refs/heads/main\n", "common/.git/commondir": "../nowhere\n" });
    const root = tree(files);
    symlinkSync("../linked-gitfile", join(root, "linked/.git"));
    for (const dir of ["objects", "refs"]) mkdirSync(join(root, "junkhead/.git", dir));
    const walked = (await build(root)).index;
    gitInit(root);
    const listedByGit = git(root, "ls-files", "-z", "--others", "--exclude-standard").split("\0").filter(Boolean);
    const { near, index } = await bothJudges(root);
    for (const dir of ["linked", "junkhead", "common"]) {
      expect(listedByGit).toContain(`${dir}/AGENTS.md`); // git lists its files as its own
      const paths = [`${dir}/`, `${dir}/.env`, `${dir}/AGENTS.md`];
      const byGit = gitIgnored(root, paths);
      expect([...byGit]).toEqual([`${dir}/.env`]);
      for (const path of paths) {
        expect([path, index.isIgnored(path)]).toEqual([path, byGit.has(path)]);
        expect([path, near.isIgnored(path)]).toEqual([path, byGit.has(path)]);
        expect([path, walked.isIgnored(path)]).toEqual([path, byGit.has(path)]);
      }
    }
    expect(index.files).toEqual(["AGENTS.md", "common/AGENTS.md", "junkhead/AGENTS.md", "linked/AGENTS.md"]);
  });

  test("a linked worktree made inside the worktree (`git worktree add wt`) is judged with the repository's info/exclude, read through its `commondir`, as git in it does", async () => {
    const root = tree({ "AGENTS.md": "", "src/AGENTS.md": "" });
    gitInit(root);
    git(root, "add", ".");
    git(root, "commit", "-qm", "c");
    git(root, "worktree", "add", "-q", "wt");
    write(root, { ".git/info/exclude": "scratch/\n", "wt/scratch/AGENTS.md": "", "scratch/AGENTS.md": "" });
    expect(spawnSync("git", ["check-ignore", "-q", "scratch"], { cwd: join(root, "wt") }).status).toBe(0);
    const { near, index } = await bothJudges(root);
    expect(index.isIgnored("scratch/")).toBe(true);
    expect(near.isIgnored("wt/scratch/")).toBe(true);
    expect(index.isIgnored("wt/scratch/")).toBe(true);
  });

  test("a submodule is judged by its own rules, its info/exclude read where its `.git` file leads into the outer .git; a `gitdir:` leading elsewhere is not followed, and a .gitmodules path with no checkout is a plain directory", async () => {
    const source = tree({ ".gitignore": "node_modules/\n", "AGENTS.md": "" });
    gitInit(source);
    git(source, "add", ".");
    git(source, "commit", "-qm", "source");
    const root = tree({ ".gitignore": "built/\n", "AGENTS.md": "" });
    gitInit(root);
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", source, "sub");
    expect(readFileSync(join(root, "sub/.git"), "utf8")).toStartWith("gitdir: ../.git/modules/sub");
    // A clone elsewhere, linked in by a `.git` file: its info/exclude lies outside the outer .git.
    const elsewhere = tree({});
    gitInit(elsewhere);
    write(elsewhere, { ".git/info/exclude": "far.md\n" });
    write(root, {
      ".git/modules/sub/info/exclude": "sub-excluded.md\n",
      ".gitmodules": `${readFileSync(join(root, ".gitmodules"), "utf8")}[submodule "plain"]\n\tpath = plain\n\turl = ${source}\n`,
      "sub/node_modules/evil/AGENTS.md": "",
      "sub/built/AGENTS.md": "",
      "sub/sub-excluded.md": "",
      "linked/.git": `gitdir: ${join(elsewhere, ".git")}\n`,
      "linked/far.md": "",
      "plain/built/AGENTS.md": "",
    });
    const { index, logged } = await build(root);
    expect(logged).toEqual([]);
    expect(["sub/node_modules/", "sub/built/", "sub/sub-excluded.md", "sub/AGENTS.md", "linked/far.md", "plain/built/"].map((path) => index.isIgnored(path))).toEqual([
      true,
      false,
      true,
      false,
      false,
      true,
    ]);
  });

  test("file names with newlines, tabs, quotes, backslashes, glob characters and unicode (the -z output)", async () => {
    const dirs = ["new\nline", "tab\there", "space dir", ' quote"d ', "back\\slash", "star*", "[br]", "ünï", "emoji😀", "\u202eRTL", "?"];
    const files: Record<string, string> = { ".gitignore": "*.local.md\n" };
    for (const dir of dirs) {
      files[`${dir}/AGENTS.md`] = "";
      files[`${dir}/x/CLAUDE.local.md`] = "";
    }
    const root = tree(files);
    const walked = (await build(root)).index;
    gitInit(root);
    const listed = (await build(root)).index;
    const expected = dirs.flatMap((dir) => [`${dir}/AGENTS.md`, `${dir}/x/CLAUDE.local.md`]).sort();
    expect(listed.source).toBe("git");
    expect(listed.files).toEqual(expected);
    expect(walked.source).toBe("walk");
    expect(walked.files).toEqual(expected);
  });

  test("a name that is not valid UTF-8 cannot be named by a string: skipped by both, not mangled", async () => {
    const root = tree({ "ok/AGENTS.md": "" });
    const bad = Buffer.concat([Buffer.from(join(root, "bad")), Buffer.from([0xff, 0xfe])]);
    mkdirSync(bad);
    writeFileSync(Buffer.concat([bad, Buffer.from("/AGENTS.md")]), "");
    writeFileSync(Buffer.concat([Buffer.from(join(root, "ok/CLAUDE")), Buffer.from([0xc3]), Buffer.from(".md")]), "");
    expect((await build(root, { fileNames: ["AGENTS.md", "CLAUDE\uFFFD.md"] })).index.files).toEqual(["ok/AGENTS.md"]);
    gitInit(root);
    expect((await build(root, { fileNames: ["AGENTS.md", "CLAUDE\uFFFD.md"] })).index.files).toEqual(["ok/AGENTS.md"]);
  });
});

// ---- how git is asked ----

/** The real git, found before any test puts another on PATH. */
const REAL_GIT = Bun.which("git") ?? "git";

/** A directory holding a `git` that runs `script` (sh). */
function fakeGit(script: string): string {
  const bin = tree();
  writeFileSync(join(bin, "git"), `#!/bin/sh\n${script}\n`);
  chmodSync(join(bin, "git"), 0o755);
  return bin;
}

/** A `git` that writes each command line to `log`, then runs the real one. */
const loggingGit = (log: string): string => fakeGit(`printf '%s\\n' "$*" >> '${log}'\nexec '${REAL_GIT}' "$@"`);

async function withPath<T>(dir: string, work: () => Promise<T>): Promise<T> {
  const path = process.env.PATH;
  process.env.PATH = `${dir}:${path}`;
  try {
    return await work();
  } finally {
    process.env.PATH = path;
  }
}

/** Builds the index of `root` with a logging git: the index, what it logged, and git's command lines. */
async function buildLogged(root: string): Promise<{ index: WorktreeIndex; logged: Logged[]; commands: string[] }> {
  const log = join(tree(), "git.log");
  const { index, logged } = await withPath(loggingGit(log), () => build(root));
  const lines = readFileSync(log, "utf8").trim().split("\n");
  // Every command turns core.fsmonitor off first (see the test of a repository's fsmonitor program).
  expect(lines.filter((line) => !line.startsWith("-c core.fsmonitor= "))).toEqual([]);
  return { index, logged, commands: lines.map((line) => line.slice("-c core.fsmonitor= ".length)) };
}

describe("how git is asked", () => {
  test("four git processes; core.excludesFile (`~` expanded) and core.ignoreCase are read by one", async () => {
    const root = tree({ ".gitignore": "A/\n", "a/AGENTS.md": "", "B/AGENTS.md": "", "c/AGENTS.md": "" });
    gitInit(root);
    const home = tree({ "my excludes": "b/\n" });
    git(root, "config", "core.excludesFile", "~/my excludes");
    git(root, "config", "core.ignoreCase", "Yes");
    const home0 = process.env.HOME;
    try {
      process.env.HOME = home;
      const { index, logged, commands } = await buildLogged(root);
      expect(index.source).toBe("git");
      expect(logged).toEqual([]);
      expect(index.files).toEqual(["c/AGENTS.md"]);
      // `b/` from ~/my excludes, `A/` from .gitignore: both matched whatever the case.
      expect([index.isIgnored("B/"), index.isIgnored("a/"), index.isIgnored("c/")]).toEqual([true, true, false]);
      expect(commands).toHaveLength(4);
      expect(commands.filter((line) => line.startsWith("config "))).toEqual(["config -z --type=path --get-regexp ^core\\.(excludesfile|ignorecase)$"]);
    } finally {
      process.env.HOME = home0;
    }
  });

  test("neither key set: case matters, the default excludes file ($XDG_CONFIG_HOME/git/ignore) applies", async () => {
    const root = tree({ ".gitignore": "A/\n", "a/AGENTS.md": "", "x/AGENTS.md": "" });
    gitInit(root);
    write(sandbox, { "xdg/git/ignore": "x/\n" });
    try {
      const { index, commands } = await buildLogged(root);
      expect(index.files).toEqual(["a/AGENTS.md"]);
      expect(commands.filter((line) => line.startsWith("config "))).toHaveLength(1);
    } finally {
      rmSync(join(sandbox, "xdg"), { recursive: true });
    }
  });

  test("a core.ignoreCase beyond git's boolean words is asked of git on its own, typed; a bad one means the walk", async () => {
    const cases = [
      { config: "[core]\n\tignoreCase\n", caseless: true }, // no value: true (and refused by --type=path)
      { config: "[core]\n\tignoreCase = 1\n", caseless: true },
      { config: "[core]\n\tignoreCase = 0x0\n", caseless: false },
      { config: "[core]\n\tignoreCase = OFF\n", caseless: false, folded: true },
      { config: "[core]\n\tignoreCase = on\n\tignoreCase = no\n", caseless: false, folded: true }, // the last one counts
    ];
    for (const { config, caseless, folded } of cases) {
      const root = tree({ ".gitignore": "A/\n", "a/AGENTS.md": "" });
      gitInit(root);
      appendFileSync(join(root, ".git/config"), config);
      const { index, logged, commands } = await buildLogged(root);
      expect([config, index.source, index.isIgnored("a/"), logged]).toEqual([config, "git", caseless, []]);
      expect([config, commands.filter((line) => line.startsWith("config ")).length]).toEqual([config, folded ? 1 : 3]);
    }
    for (const config of ["[core]\n\tignoreCase = bogus\n", "[core]\n\texcludesFile\n"]) {
      const root = tree({ "a/AGENTS.md": "" });
      gitInit(root);
      appendFileSync(join(root, ".git/config"), config);
      const { index, logged } = await build(root);
      expect([config, index.source, index.files]).toEqual([config, "walk", ["a/AGENTS.md"]]);
      // git refuses such a configuration whatever it is asked.
      expect(logged.some((line) => line.message.includes("exited with 128"))).toBe(true);
    }
  });

  test("a repository's core.fsmonitor program is never run (git ls-files runs it; the listing is git's all the same)", async () => {
    const root = tree({ ".gitignore": "dist/\n", "AGENTS.md": "", "a/AGENTS.md": "", "dist/AGENTS.md": "" });
    gitInit(root);
    git(root, "add", ".");
    git(root, "commit", "-qm", "init");
    // What a repository unpacked from an archive may carry in its .git/config: a program of its own.
    const ran = join(tree(), "ran");
    const hook = join(root, ".git", "fsmonitor-hook");
    writeFileSync(hook, `#!/bin/sh\necho "$*" >> '${ran}'\nexit 1\n`);
    chmodSync(hook, 0o755);
    git(root, "config", "core.fsmonitor", hook);
    spawnSync("git", ["ls-files"], { cwd: root });
    expect(readFileSync(ran, "utf8")).not.toBe(""); // this git does run it
    rmSync(ran);
    const { index, logged } = await build(root);
    expect([index.source, index.files, logged]).toEqual(["git", ["AGENTS.md", "a/AGENTS.md"], []]);
    const near = new NearIgnores(root, (await readIgnoreBasis(root, () => {})) as Exclude<Awaited<ReturnType<typeof readIgnoreBasis>>, { ok: false }>, () => {});
    expect(near.isIgnored("dist/")).toBe(true);
    expect(readFileSync(ran, { encoding: "utf8", flag: "a+" })).toBe("");
  });

  test("git that fails gives way to the walk, saying why (its first line of stderr)", async () => {
    const root = tree({ "AGENTS.md": "" });
    gitInit(root);
    const { index, logged } = await withPath(fakeGit("echo 'fatal: not today' >&2\necho 'more' >&2\nexit 128"), () => build(root));
    expect(index.source).toBe("walk");
    expect(index.files).toEqual(["AGENTS.md"]);
    expect(logged.map((line) => line.message)).toContainEqual(expect.stringContaining("exited with 128: fatal: not today)"));
  });

  test("on Node (the explain CLI) git runs through node:child_process, with the same answers", async () => {
    const node = Bun.which("node");
    if (node === null) return; // nothing to run it on
    const out = tree();
    // Its packages are loaded from the project's node_modules, as dist/ loads them.
    const built = await Bun.build({ entrypoints: [join(import.meta.dir, "../../plugin/files/worktree-index.ts")], outdir: out, target: "node", packages: "external" });
    expect(built.success).toBe(true);
    symlinkSync(join(import.meta.dir, "../../node_modules"), join(out, "node_modules"));
    writeFileSync(
      join(out, "run.mjs"),
      `import { buildWorktreeIndex } from "./worktree-index.js";
const logged = [];
const index = await buildWorktreeIndex({ worktree: process.argv[2], fileNames: ["AGENTS.md", "CLAUDE.md"], rules: [".opencode/rules/**/*.md", "docs/{notes,todo}.md"], maxEntries: 200000, gitTimeoutMs: Number(process.argv[3]), log: (level, message) => logged.push(message) });
console.log(JSON.stringify({ runtime: typeof Bun === "undefined" ? "node" : "bun", source: index.source, files: index.files, logged }));`,
    );
    const run = (worktree: string, path = process.env.PATH, gitTimeoutMs = 10_000): { runtime: string; source: string; files: string[]; logged: string[] } => {
      const child = spawnSync(node, [join(out, "run.mjs"), worktree, String(gitTimeoutMs)], { encoding: "utf8", env: { ...process.env, PATH: path } });
      if (child.status !== 0) throw new Error(child.stderr);
      return JSON.parse(child.stdout);
    };
    const root = tree({ ...MONOREPO, "docs/todo.md": "" });
    gitInit(root);
    git(root, "add", ".gitignore", "AGENTS.md", "apps/web", ".opencode");
    git(root, "commit", "-qm", "init");
    const expected = [...MONOREPO_FILES, "docs/todo.md"].sort();
    expect(run(root)).toEqual({ runtime: "node", source: "git", files: expected, logged: [] });
    const hung = run(root, `${fakeGit("exec /bin/sleep 30")}:${process.env.PATH}`, 300);
    expect([hung.source, hung.files]).toEqual(["walk", expected]);
    expect(hung.logged.some((message) => message.includes("timed out"))).toBe(true);
    const failing = run(root, `${fakeGit("echo 'fatal: no' >&2\nexit 128")}:${process.env.PATH}`);
    expect(failing.logged.some((message) => message.includes("exited with 128: fatal: no"))).toBe(true);
    const absent = run(root, tree());
    expect([absent.source, absent.files]).toEqual(["walk", expected]);
  }, 20_000);
});

// ---- rules globs ----

describe("rules globs", () => {
  /**
   * picomatch (dot, strictBrackets), except where the frontmatter's globs (which the option's are
   * matched as) differ on purpose: a trailing `/**` matches the directory itself after a wildcard
   * segment too (rules/contract.ts).
   */
  const reference = (glob: string) => {
    const variants = [glob];
    while (variants.at(-1)!.endsWith("/**")) variants.push(variants.at(-1)!.slice(0, -3));
    const matchers = variants.map((variant) => picomatch(variant, { dot: true, strictBrackets: true }));
    return (path: string) => matchers.some((matches) => matches(path));
  };

  test("a rules glob matches the markdown files picomatch (dot, strictBrackets) matches", async () => {
    const root = tree();
    const segment = fc.constantFrom("a", "b", "ab", ".x", "x.md", "a.b", "a-b", "*", "**", "ü", " ");
    const leaf = fc.constantFrom("x.md", "a.md", "ab.md", "a.b.md", "*.md", ".x.md", "a.MD");
    const globSegment = fc.constantFrom("a", "b", ".x", "*", "**", "*.md", "a*", "*a*", "x.md", "*b", "a.b", "a-b", "*.*", "*.MD", "{a,b}", "?.md", "[ax]");
    await fc.assert(
      fc.asyncProperty(fc.array(globSegment, { minLength: 1, maxLength: 4 }), fc.array(fc.tuple(fc.array(segment, { maxLength: 4 }), leaf), { minLength: 1, maxLength: 12 }), async (globSegments, paths) => {
        const glob = globSegments.join("/");
        const { index, logged } = await build(root, { rules: [glob] });
        expect(logged.filter((line) => line.level === "warn")).toEqual([]);
        const matches = reference(glob);
        // Paths the glob was meant to match too: `*` and `**` replaced by a few texts (not where a class or brace
        // would be taken as literal text: picomatch then matches that text too, a glob of `[ax]` matching `[ax]`).
        const fitted = [["", ""], ["x", "a/b"], ["a.md", ""]].map(([star = "", globstar = ""]) =>
          globSegments.flatMap((part) => (part === "**" ? globstar.split("/").filter(Boolean) : [part.replaceAll("*", star)])),
        );
        const markdownPaths = fitted.filter((parts) => parts.length > 0 && parts.every((part) => part !== "" && part !== "." && !/[[{?]/.test(part)) && /.\.md$/.test(parts.at(-1) ?? ""));
        for (const path of [...paths.map(([dirs, name]) => [...dirs, name]), ...markdownPaths].map((parts) => parts.join("/"))) {
          expect([glob, path, index.mayLoad(path)]).toEqual([glob, path, matches(path)]);
        }
      }),
      { numRuns: 300 },
    );
  }, 60_000);

  test("a glob of many stars against a long file name is matched in bounded time (found in a hunt: a regular expression took 10 s)", async () => {
    const root = tree({ [`${"-".repeat(200)}.md`]: "x", "AGENTS.md": "" });
    gitInit(root);
    const started = performance.now();
    const { index } = await build(root, { rules: ["*-*-*-*-*-*-*-*-*-x.md", "**/*-*-*-*-*-*-*-*-*-*-*-x.md"] });
    expect(index.mayLoad(`${"-".repeat(200)}.md`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  test("a glob that leaves the worktree or does not parse is logged and costs only itself: the listing stays git's, the other globs hold (found in a hunt)", async () => {
    const files: Record<string, string> = { "AGENTS.md": "", ".opencode/rules/team.md": "" };
    for (let i = 0; i < 400; i++) files[`aaa/junk${i}.txt`] = "x";
    const root = tree(files);
    gitInit(root);
    for (const bad of ["../shared/*.md", "/etc/rules/*.md", "+(a|b).md", "[unclosed.md"]) {
      const { index, logged } = await build(root, { rules: [".opencode/rules/**/*.md", bad], maxEntries: 100 });
      expect([bad, index.source, index.files]).toEqual([bad, "git", [".opencode/rules/team.md", "AGENTS.md"]]);
      expect(logged.filter((line) => line.level === "warn").map((line) => line.message.includes("that glob is ignored"))).toEqual([true]);
    }
  });

  test("a list of exclusions alone makes no rule file; an exclusion takes away from the others", async () => {
    const root = tree({ "AGENTS.md": "", "docs/a.md": "", "docs/draft/b.md": "" });
    gitInit(root);
    expect((await build(root, { rules: ["!docs/draft/**"] })).index.files).toEqual(["AGENTS.md"]);
    expect((await build(root, { rules: ["docs/**/*.md", "!docs/draft/**"] })).index.files).toEqual(["AGENTS.md", "docs/a.md"]);
    // Two negations include, through git as through the walk (found in review: it made no pathspec).
    expect((await build(root, { rules: ["!!docs/*.md"] })).index.files).toEqual(["AGENTS.md", "docs/a.md"]);
  });
});

// ---- the walk ----

describe("the walk (no git repository)", () => {
  test("the same answer as git on the monorepo", async () => {
    const root = tree(MONOREPO);
    const { index, logged } = await build(root);
    expect(index.source).toBe("walk");
    expect(index.files).toEqual(MONOREPO_FILES);
    expect(logged.map((line) => line.level)).toEqual(["info"]);
    expect(logged[0]?.message).toContain("walking");
  });

  test("never follows a symlink: loops, self links and links out of the worktree are entries, not directories", async () => {
    const outside = tree({ "AGENTS.md": "outside", "deep/AGENTS.md": "outside" });
    const root = tree({ "a/AGENTS.md": "", "a/b/CLAUDE.md": "" });
    symlinkSync("..", join(root, "a/b/up"));
    symlinkSync(".", join(root, "loop"));
    symlinkSync("self", join(root, "self"));
    symlinkSync(outside, join(root, "out"));
    symlinkSync(join(outside, "AGENTS.md"), join(root, "a/b/AGENTS.md"));
    symlinkSync("missing", join(root, "CLAUDE.md"));
    const walked = (await build(root)).index;
    // Symlinked files are listed as git lists them; reading them (and refusing what leads out) is the store's part.
    expect(walked.files).toEqual(["CLAUDE.md", "a/AGENTS.md", "a/b/AGENTS.md", "a/b/CLAUDE.md"]);
    gitInit(root);
    expect((await build(root)).index.files).toEqual(walked.files);
  });

  test("never enters .git, nor a nested repository (as git, which lists neither)", async () => {
    const root = tree({ "AGENTS.md": "", ".git/AGENTS.md": "", "vendor/lib/AGENTS.md": "", "vendor/AGENTS.md": "" });
    gitInit(join(root, "vendor/lib"));
    expect((await build(root)).index.files).toEqual(["AGENTS.md", "vendor/AGENTS.md"]);
  });

  test("an unreadable directory is passed over", async () => {
    if (process.getuid?.() === 0) return; // root reads everything
    const root = tree({ "open/AGENTS.md": "", "closed/AGENTS.md": "" });
    chmodSync(join(root, "closed"), 0o000);
    try {
      expect((await build(root)).index.files).toEqual(["open/AGENTS.md"]);
    } finally {
      chmodSync(join(root, "closed"), 0o755);
    }
  });

  test(`nothing deeper than ${MAX_DEPTH} levels, for the walk and for git alike (and logged)`, async () => {
    const deep = (levels: number): string => `${Array.from({ length: levels }, (_, i) => `d${i}`).join("/")}/AGENTS.md`;
    const root = tree({ [deep(MAX_DEPTH)]: "", [deep(MAX_DEPTH + 1)]: "", [deep(MAX_DEPTH + 5)]: "" });
    const walked = await build(root);
    expect(walked.index.files).toEqual([deep(MAX_DEPTH)]);
    expect(walked.index.truncated).toBe(true);
    expect(walked.logged.some((line) => line.level === "warn" && line.message.includes(`${MAX_DEPTH} levels`))).toBe(true);
    gitInit(root);
    const listed = await build(root);
    expect(listed.index.files).toEqual([deep(MAX_DEPTH)]);
    expect(listed.index.truncated).toBe(true);
    expect(listed.index.isIgnored(deep(MAX_DEPTH + 1))).toBe(true);
    expect(listed.index.mayLoad(deep(MAX_DEPTH + 1))).toBe(false);
  });
});

// ---- git and the walk, generated trees ----

const DIRS = ["a", "b", "build", "node_modules", ".opencode", "rules", "x y", "ü", "lib"];
const LEAVES = ["AGENTS.md", "CLAUDE.md", "AGENTS.local.md", "CLAUDE.override.md", "x.md", "code.ts", "notes.log"];
const PATTERNS = [
  "node_modules/", "build", "/build/", "!build/", "*.local.md", "!AGENTS.local.md", "/a/", "a/", "b/", "!b/", "**/x.md",
  "a/**/b", "*.md", "!AGENTS.md", "!CLAUDE.md", "rules/", "x*", "[ab]/", "ü/", "x y/", "lib/**", "!lib/a/", "*", "!*/",
  "**/build/**", "*.log", "# comment", "", "\\!x", "b/*", "!b/a/", "/*", "!/lib/",
];

const generatedTree = fc.record({
  files: fc.uniqueArray(
    fc.tuple(fc.array(fc.constantFrom(...DIRS), { maxLength: 4 }), fc.constantFrom(...LEAVES)).map(([dirs, leaf]) => [...dirs, leaf].join("/")),
    { minLength: 1, maxLength: 40 },
  ),
  ignores: fc.array(fc.tuple(fc.array(fc.constantFrom(...DIRS), { maxLength: 3 }), fc.array(fc.constantFrom(...PATTERNS), { minLength: 1, maxLength: 5 })), { maxLength: 4 }),
});

describe("git and the walk agree", () => {
  test("on generated trees: the same files, and isIgnored is git check-ignore's answer for every path", async () => {
    await fc.assert(
      fc.asyncProperty(generatedTree, async ({ files, ignores }) => {
        const content: Record<string, string> = Object.fromEntries(files.map((path) => [path, ""]));
        for (const [dirs, patterns] of ignores) content[[...dirs, ".gitignore"].join("/")] = `${patterns.join("\n")}\n`;
        const root = tree(content);
        try {
          const walked = (await build(root, { rules: ["**/rules/**/*.md"] })).index;
          gitInit(root);
          const listed = (await build(root, { rules: ["**/rules/**/*.md"] })).index;
          expect(walked.source).toBe("walk");
          expect(listed.source).toBe("git");
          expect(walked.files).toEqual(listed.files);
          const paths = everyPath(Object.keys(content));
          const ignoredByGit = gitIgnored(root, paths);
          for (const path of paths) {
            expect([path, listed.isIgnored(path)]).toEqual([path, ignoredByGit.has(path)]);
            expect([path, walked.isIgnored(path)]).toEqual([path, ignoredByGit.has(path)]);
          }
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      }),
      { numRuns: 40 },
    );
  }, 60_000);

  test("a directory re-included by a deeper .gitignore, whatever its name (escaping)", async () => {
    const name = fc
      .string({ unit: fc.constantFrom(...Array.from("ab*?[]\\!# \n\tü😀-.")), minLength: 1, maxLength: 8 })
      .filter((n) => n !== "." && n !== ".." && n !== ".git" && !/^\s|\s$/.test(n));
    await fc.assert(
      fc.asyncProperty(name, async (dir) => {
        const root = tree({
          ".gitignore": "build/\n*.local.md\n",
          [`${dir}/.gitignore`]: "!build/\n",
          [`${dir}/build/AGENTS.md`]: "",
          [`${dir}/build/sub/CLAUDE.md`]: "",
          [`${dir}/build/sub/AGENTS.local.md`]: "",
          "other/build/AGENTS.md": "",
        });
        try {
          const walked = (await build(root)).index;
          gitInit(root);
          const listed = (await build(root)).index;
          const expected = [`${dir}/build/AGENTS.md`, `${dir}/build/sub/AGENTS.local.md`, `${dir}/build/sub/CLAUDE.md`].sort();
          expect(listed.files).toEqual(expected);
          expect(walked.files).toEqual(expected);
          expect(listed.isIgnored(`${dir}/build/sub/`)).toBe(false);
          expect(listed.isIgnored("other/build/")).toBe(true);
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      }),
      { numRuns: 40 },
    );
  }, 60_000);

  test("escapeWildmatch: as a .gitignore pattern, the escaped text matches itself and nothing else (git decides)", () => {
    const root = tree();
    gitInit(root);
    const text = fc.string({ unit: fc.constantFrom(..."ab*?[]\\!-^".split("")), minLength: 1, maxLength: 8 });
    fc.assert(
      fc.property(text, fc.string({ unit: fc.constantFrom(..."ab*?[]\\!-^".split("")), minLength: 1, maxLength: 8 }), (literal, other) => {
        // git's own matcher decides: check-ignore --no-index with the escaped pattern as the only rule.
        writeFileSync(join(root, ".gitignore"), `/${escapeWildmatch(literal)}\n`);
        const ignored = gitIgnored(root, [literal, other].filter((path) => !path.includes("/")));
        expect(ignored.has(literal)).toBe(true);
        expect(ignored.has(other)).toBe(other === literal);
      }),
      { numRuns: 100 },
    );
  }, 60_000);

  test("file names with glob characters find exactly their ignored local variants", async () => {
    const stem = fc.string({ unit: fc.constantFrom(..."A*?[]\\!".split("")), minLength: 1, maxLength: 6 }).filter((s) => !s.startsWith("!"));
    await fc.assert(
      fc.asyncProperty(stem, async (name) => {
        const local = `${name}.local.md`;
        // Decoys a glob would match if the name were not escaped.
        const root = tree({ ".gitignore": "*.local.md\n", [`d/${local}`]: "", "d/AAA.local.md": "", "d/A.local.md": "", "d/[.local.md": "" });
        try {
          gitInit(root);
          const { index } = await build(root, { fileNames: [`${name}.md`] });
          expect(index.files).toEqual([`d/${local}`]);
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      }),
      { numRuns: 30 },
    );
  }, 60_000);
});

// ---- bounds ----

describe("bounds", () => {
  test("a 50,000-file tree: listed by git and by the walk within seconds, the event loop never stalled", async () => {
    const root = tree();
    for (let d = 0; d < 500; d++) {
      const dir = join(root, `pkg${d % 50}`, `mod${d}`);
      mkdirSync(dir, { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(join(dir, f === 0 ? "AGENTS.md" : `file${f}.ts`), "");
    }
    write(root, { ".gitignore": "pkg1/\n" });
    const measure = async (): Promise<{ index: WorktreeIndex; ms: number; stall: number }> => {
      let last = performance.now();
      let stall = 0;
      const ticker = setInterval(() => {
        const now = performance.now();
        stall = Math.max(stall, now - last);
        last = now;
      }, 2);
      const start = performance.now();
      try {
        const { index } = await build(root);
        return { index, ms: performance.now() - start, stall: Math.max(stall, performance.now() - last) };
      } finally {
        clearInterval(ticker);
      }
    };
    const walked = await measure();
    gitInit(root);
    const listed = await measure();
    for (const run of [walked, listed]) {
      expect(run.index.files).toHaveLength(490);
      expect(run.index.truncated).toBe(false);
      expect(run.ms).toBeLessThan(8000);
      expect(run.stall).toBeLessThan(500);
    }
    expect([walked.index.source, listed.index.source]).toEqual(["walk", "git"]);
    expect(walked.index.files).toEqual(listed.index.files);
  }, 60_000);

  test("maxEntries: the listing stops there, says so once, and keeps what it found", async () => {
    const files: Record<string, string> = {};
    for (let d = 0; d < 30; d++) for (let f = 0; f < 10; f++) files[`p${String(d).padStart(2, "0")}/${f === 0 ? "AGENTS.md" : `f${f}.ts`}`] = "";
    const root = tree(files);
    const full = Object.keys(files).filter((path) => path.endsWith("AGENTS.md")).sort();
    const check = (run: { index: WorktreeIndex; logged: Logged[] }): void => {
      expect(run.index.truncated).toBe(true);
      expect(run.index.files.length).toBeGreaterThan(0);
      expect(run.index.files.length).toBeLessThan(15);
      for (const file of run.index.files) expect(full).toContain(file);
      const warnings = run.logged.filter((line) => line.level === "warn");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.message).toContain("maxEntries");
    };
    check(await build(root, { maxEntries: 100 }));
    gitInit(root);
    // git is asked for candidate names only (pathspecs): it lists the 30 AGENTS.md, not 300 paths.
    check(await build(root, { maxEntries: 10 }));
    const untouched = await build(root, { maxEntries: 100_000 });
    expect(untouched.index.files).toEqual(full);
    expect(untouched.index.truncated).toBe(false);
  });

  test("a listing cut at maxEntries still judges by every .gitignore: those it did not reach are read when their directory is asked about, by git's listing and the walk", async () => {
    const files: Record<string, string> = {};
    for (let d = 0; d < 30; d++) for (let f = 0; f < 5; f++) files[`p${String(d).padStart(2, "0")}/${f === 0 ? "AGENTS.md" : `f${f}.ts`}`] = "";
    Object.assign(files, { "p29/.gitignore": ".env\nnode_modules/\n", "p29/.env": "SECRET=1", "p29/node_modules/x/AGENTS.md": "", "p29/src/AGENTS.md": "" });
    const root = tree(files);
    const paths = everyPath(["p29/.env", "p29/node_modules/x/AGENTS.md", "p29/src/AGENTS.md", "p00/AGENTS.md"]);
    const walked = await build(root, { maxEntries: 40 });
    gitInit(root);
    const listed = await build(root, { maxEntries: 10 });
    const byGit = gitIgnored(root, paths);
    expect([...byGit].sort()).toEqual(["p29/.env", "p29/node_modules/", "p29/node_modules/x/", "p29/node_modules/x/AGENTS.md"]);
    for (const { index } of [walked, listed]) {
      expect(index.truncated).toBe(true);
      for (const path of paths) expect([index.source, path, index.isIgnored(path)]).toEqual([index.source, path, byGit.has(path)]);
      expect([index.mayLoad("p29/node_modules/x/AGENTS.md"), index.mayLoad("p29/src/AGENTS.md")]).toEqual([false, true]);
    }
  });

  test("a huge .gitignore is cut at 1 MiB (logged), hostile patterns cost nothing, a bad one is left out", async () => {
    const filler = "x".repeat(120) + "\n";
    const hostile = `${"a/**/".repeat(8)}b\n${"**/".repeat(30)}z\n[z-a]\n[\n\\\n`;
    const root = tree({
      ".gitignore": hostile + filler.repeat((1024 * 1024) / filler.length) + "cut/\n",
      "cut/AGENTS.md": "",
      [`${"a/".repeat(40)}AGENTS.md`]: "",
    });
    const start = performance.now();
    const { index, logged } = await build(root);
    expect(performance.now() - start).toBeLessThan(3000);
    expect(index.files).toContain("cut/AGENTS.md");
    expect(index.files).toContain(`${"a/".repeat(40)}AGENTS.md`);
    expect(logged.some((line) => line.message.includes("larger than"))).toBe(true);
    expect(logged.filter((line) => line.message.includes('"**" are too costly'))).toHaveLength(2);
  });

  test("hostile questions: outside paths, dot segments, huge and deep paths answer at once", async () => {
    const root = tree({ ".gitignore": "node_modules/\n", "AGENTS.md": "" });
    gitInit(root);
    const { index } = await build(root);
    for (const outside of ["..", "../x", "../node_modules/", "/etc/", "/", "a/../../node_modules/"]) {
      expect([outside, index.isIgnored(outside), index.mayLoad(`${outside}/AGENTS.md`)]).toEqual([outside, false, false]);
    }
    expect(index.isIgnored("./node_modules/x")).toBe(true);
    expect(index.isIgnored("a//b/../node_modules/")).toBe(true);
    expect(index.isIgnored("")).toBe(false);
    expect(index.isIgnored(".")).toBe(false);
    expect(index.mayLoad("AGENTS.md")).toBe(true);
    expect(index.mayLoad("./AGENTS.md")).toBe(true);
    const start = performance.now();
    expect(index.isIgnored(`${"src/".repeat(300_000)}x`)).toBe(true);
    expect(index.isIgnored("a".repeat(2_000_000))).toBe(true);
    expect(index.isIgnored(`${"d/".repeat(MAX_DEPTH)}`)).toBe(false);
    expect(index.isIgnored("x\0y/")).toBe(false);
    expect(performance.now() - start).toBeLessThan(500);
  });

  test("git that hangs gives way to the walk at the deadline; git absent too", async () => {
    const root = tree({ "AGENTS.md": "" });
    gitInit(root);
    const bin = tree();
    writeFileSync(join(bin, "git"), "#!/bin/sh\nexec /bin/sleep 30\n");
    chmodSync(join(bin, "git"), 0o755);
    const path = process.env.PATH;
    try {
      process.env.PATH = `${bin}:${path}`;
      const start = performance.now();
      const hung = await build(root, { gitTimeoutMs: 300 });
      expect(performance.now() - start).toBeLessThan(5000);
      expect(hung.index.source).toBe("walk");
      expect(hung.index.files).toEqual(["AGENTS.md"]);
      expect(hung.logged.some((line) => line.message.includes("timed out"))).toBe(true);
      unlinkSync(join(bin, "git"));
      process.env.PATH = bin;
      const absent = await build(root);
      expect(absent.index.source).toBe("walk");
      expect(absent.index.files).toEqual(["AGENTS.md"]);
    } finally {
      process.env.PATH = path;
    }
  });

  test("bad rules globs are reported and left out; the others still apply", async () => {
    const root = tree({ "rules/a.md": "", "docs/b.md": "", "x/rules/c.md": "" });
    const { index, logged } = await build(root, { rules: ["[", "/abs/**/*.md", "../**/*.md", "rules/*.md", "", "docs/**"] });
    expect(index.files).toEqual(["docs/b.md", "rules/a.md"]);
    expect(logged.filter((line) => line.level === "warn")).toHaveLength(4);
  });
});

// ---- freshness ----

describe("update", () => {
  test("created and deleted candidates enter and leave at once; ignored ones never; .gitignore asks for a rebuild", async () => {
    const root = tree(MONOREPO);
    gitInit(root);
    const { index } = await build(root);
    const before = index.files;
    expect(index.update("apps/fresh/AGENTS.md", "file")).toBe("changed");
    expect(index.files).toContain("apps/fresh/AGENTS.md");
    expect(before).not.toContain("apps/fresh/AGENTS.md"); // a listing handed out earlier does not change under its holder
    expect(index.update("apps/fresh/AGENTS.md", "file")).toBe("unchanged");
    expect(index.update("apps/fresh/CLAUDE.local.md", "file")).toBe("changed");
    expect(index.update(".opencode/rules/new.md", "file")).toBe("changed");
    expect(index.update("node_modules/y/AGENTS.md", "file")).toBe("unchanged");
    expect(index.update("apps/web/dist/AGENTS.local.md", "file")).toBe("unchanged");
    expect(index.update("apps/fresh/index.ts", "file")).toBe("unchanged");
    expect(index.update("../outside/AGENTS.md", "file")).toBe("unchanged");
    expect(index.update("/etc/AGENTS.md", "file")).toBe("unchanged");
    expect(index.update("", "gone")).toBe("unchanged");
    expect(index.update("apps/.gitignore", "file")).toBe("rebuild");
    expect(index.update(".gitignore", "gone")).toBe("rebuild");
    expect(index.files).not.toContain("node_modules/y/AGENTS.md");
    expect(index.update("apps/fresh/AGENTS.md", "gone")).toBe("changed");
    expect(index.files).not.toContain("apps/fresh/AGENTS.md");
    expect(index.files).toContain("apps/fresh/CLAUDE.local.md");
    // A deleted directory takes every file under it, and only those (not `apps/web2`).
    index.update("apps/web2/AGENTS.md", "file");
    expect(index.update("apps/web/", "gone")).toBe("changed");
    expect(index.files.filter((file) => file.startsWith("apps/web"))).toEqual(["apps/web2/AGENTS.md"]);
    expect([...index.files].sort()).toEqual([...index.files]);
  });

  test("listed files deleted one at a time leave one at a time, whatever their names share with the rest", async () => {
    const names = ["a/AGENTS.md", "a/AGENTS.md.d/AGENTS.md", "a/b/AGENTS.md", "ab/AGENTS.md", ".opencode/rules/x.md", ".opencode/rules/x.md.d/y.md"];
    const root = tree(Object.fromEntries(names.map((name) => [name, ""])));
    const { index } = await build(root);
    expect([...index.files].sort()).toEqual([...names].sort());
    for (const [i, name] of names.entries()) {
      expect(index.update(name, "gone")).toBe("changed");
      expect([...index.files].sort()).toEqual(names.slice(i + 1).sort());
    }
  });

  test("update past maxEntries files is refused, marked truncated and logged once", async () => {
    const root = tree({ "AGENTS.md": "" });
    const { index, logged } = await build(root, { maxEntries: 3 });
    expect(index.truncated).toBe(false);
    expect(index.update("a/AGENTS.md", "file")).toBe("changed");
    expect(index.update("b/AGENTS.md", "file")).toBe("changed");
    expect(index.update("c/AGENTS.md", "file")).toBe("unchanged");
    expect(index.update("d/AGENTS.md", "file")).toBe("unchanged");
    expect(index.truncated).toBe(true);
    expect(logged.filter((line) => line.level === "warn")).toHaveLength(1);
  });

  test("a rebuild after a .gitignore change sees it (files a rule now hides leave, files it reveals come)", async () => {
    const root = tree({ ".gitignore": "hidden/\n", "hidden/AGENTS.md": "", "shown/AGENTS.md": "" });
    gitInit(root);
    expect((await build(root)).index.files).toEqual(["shown/AGENTS.md"]);
    writeFileSync(join(root, ".gitignore"), "shown/\n");
    expect((await build(root)).index.files).toEqual(["hidden/AGENTS.md"]);
    renameSync(join(root, ".git"), join(root, ".git-gone"));
    rmSync(join(root, ".git-gone"), { recursive: true });
    expect((await build(root)).index.files).toEqual(["hidden/AGENTS.md"]);
  });
});
