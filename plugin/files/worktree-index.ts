import { spawn } from "node:child_process";
import { constants, type Dirent } from "node:fs";
import { open, opendir } from "node:fs/promises";
import { homedir } from "node:os";
import { extname, join, posix, resolve } from "node:path";
import ignore, { type Ignore } from "ignore";
import picomatch from "picomatch";

export interface IndexOptions {
  /** Real absolute path of the worktree: every path of the index is relative to it. */
  readonly worktree: string;
  /** Option `fileNames`: base names; their `.override.md` and `.local.md` variants count too. */
  readonly fileNames: readonly string[];
  /** Option `rules`: worktree-relative globs of markdown rule files. */
  readonly rules: readonly string[];
  /** Paths examined at most (git's listing, or directory entries of the walk). */
  readonly maxEntries: number;
  readonly log?: (level: "warn" | "info", message: string) => void;
  /** How long git may take before the walk is used instead. Default GIT_TIMEOUT_MS. */
  readonly gitTimeoutMs?: number;
}

/**
 * What `update` did: `files` changed, or not, or the change was to a `.gitignore` (the rules of
 * ignoring changed: build the index again; this one stays usable meanwhile).
 */
export type IndexChange = "changed" | "unchanged" | "rebuild";

export interface WorktreeIndex {
  /** Worktree-relative paths of every context file candidate (names, variants, rules matches) that may load, sorted. */
  readonly files: readonly string[];
  /**
   * Whether a worktree-relative path is ignored by the .gitignore rules (a trailing `/` names a
   * directory: `build/` rules match only that way): by a rule of its own, or because a directory above
   * it is. Rules only, as `git check-ignore --no-index`: a tracked file is judged like any other.
   * Synchronous, from memory. A path outside the worktree (`..`, absolute) is not ignored; one deeper
   * than MAX_DEPTH levels, or longer than PATH_MAX, is.
   */
  isIgnored(rel: string): boolean;
  /**
   * Whether a context file at `rel` may load: it is not ignored, or it is a local variant
   * (`<stem>.local.md`, usually ignored on purpose) in a directory that is not ignored.
   */
  mayLoad(rel: string): boolean;
  /**
   * A file (or directory) at `changedRel` was created (`exists`) or deleted: a candidate that may
   * load enters `files`, a deleted one (or every file under a deleted directory) leaves it. Synchronous,
   * so a watcher event seen before a step shows in that step.
   */
  update(changedRel: string, exists: boolean): IndexChange;
  readonly source: "git" | "walk";
  /** Listing cut short: maxEntries reached, or directories deeper than MAX_DEPTH (logged once). */
  readonly truncated: boolean;
}

/** Past this, a slow git (a huge or cold repository, a network filesystem) gives way to the walk. */
export const GIT_TIMEOUT_MS = 10_000;
/**
 * Directory levels below the worktree where context files are looked for: deeper is a loop through a
 * mount, or a trap. The walk does not go further, git's deeper paths are left out, and `isIgnored`
 * says a deeper path is ignored (nothing there loads). It also bounds the cost of one question.
 */
export const MAX_DEPTH = 64;
/** Linux's PATH_MAX: a longer path cannot be opened, so nothing there loads either. */
const MAX_PATH_CHARS = 4096;
/** Bytes of one ignore file used at most: a real .gitignore is a few KB; the rest is left out (logged). */
const MAX_IGNORE_FILE_BYTES = 1024 * 1024;
/**
 * `ignore` compiles `**` to nested `.*` groups that backtrack exponentially: 5 of them cost 0.7 s on a
 * 64-level path, 6 cost 6 s; 3 cost at most ~10 ms for the 64 directories of the deepest path. A
 * pattern with more is left out (logged) so a hostile .gitignore cannot stall the event loop; real
 * ones rarely have more than two.
 */
const MAX_GLOBSTARS = 3;
/** The candidates' verdicts are judged in event-loop slices this long at most. */
const FILL_SLICE_MS = 4;
/** Directories the walk reads at once. */
const WALK_CONCURRENCY = 16;
/** Verdicts remembered per index; past it they are forgotten together (each is cheap to compute again). */
const MAX_VERDICTS = 8_192;
/**
 * What a name that is not valid UTF-8 decodes to: such a file cannot be opened through a JS string,
 * so a path holding it is passed over (by git and the walk alike; a real U+FFFD in a name is lost too).
 */
const UNDECODABLE = "\uFFFD";
/** A path in git's output longer than this is not a path: the output is refused. */
const MAX_PATH_BYTES = 64 * 1024;

/** The context file names of `fileNames`: `AGENTS.md` → base `AGENTS.md`, override `AGENTS.override.md`, local `AGENTS.local.md`. */
export function contextNamesOf(fileNames: readonly string[]): { base: string[]; override: string[]; local: string[] } {
  const stems = fileNames.map((name) => name.slice(0, name.length - extname(name).length));
  return {
    base: [...new Set(fileNames)],
    override: [...new Set(stems.map((stem) => `${stem}.override.md`))],
    local: [...new Set(stems.map((stem) => `${stem}.local.md`))],
  };
}

/**
 * Lists the context file candidates of the worktree: through git when it answers (tracked and
 * untracked-not-ignored files, plus ignored local variants), else through a walk that honours every
 * .gitignore on its way. Never reads a context file; reads ignore files only.
 */
export async function buildWorktreeIndex(options: IndexOptions): Promise<WorktreeIndex> {
  const log = options.log ?? (() => {});
  const names = contextNamesOf(options.fileNames);
  const classify = candidateClassifier(names, compileRules(options.rules, log));
  const listed =
    (await listWithGit(options, names.local, classify, new Budget(options.maxEntries), log)) ??
    (await listWithWalk(options.worktree, classify, new Budget(options.maxEntries), log));
  if (listed.truncated) {
    log("warn", `worktree index: listing stopped early (${listed.why}); context files past that point are not found`);
  }
  const index = new Index(listed, classify, options.maxEntries, log);
  await index.fill(listed.candidates);
  return index;
}

type Log = NonNullable<IndexOptions["log"]>;

// ---- candidates ----

type Kind = "local" | "other";

/** Which kind of context file a worktree-relative path is, if any. */
type Classifier = (rel: string) => Kind | undefined;

function candidateClassifier(names: ReturnType<typeof contextNamesOf>, rules: readonly ((rel: string) => boolean)[]): Classifier {
  const local = new Set(names.local);
  const other = new Set([...names.base, ...names.override]);
  return (rel) => {
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    if (local.has(name)) return "local";
    if (other.has(name)) return "other";
    return isMarkdown(name) && rules.some((matches) => matches(rel)) ? "other" : undefined;
  };
}

const isMarkdown = (name: string): boolean => name.length > 3 && name.slice(-3).toLowerCase() === ".md";

/**
 * One matcher per glob, so one bad glob costs only itself. `dot`: rule files under dot directories
 * (`.opencode/rules/.team/x.md`) are found by `**`; `strictBrackets`: an unbalanced bracket is an
 * error rather than a literal, so a typo is reported instead of matching nothing in silence.
 */
function compileRules(globs: readonly string[], log: Log): ((rel: string) => boolean)[] {
  const matchers: ((rel: string) => boolean)[] = [];
  for (const glob of globs) {
    if (glob.startsWith("/") || glob.split("/").includes("..")) {
      log("warn", `rules glob "${glob}" ignored: globs are relative to the worktree and cannot leave it`);
      continue;
    }
    try {
      matchers.push(picomatch(glob, { dot: true, strictBrackets: true }));
    } catch (error) {
      log("warn", `rules glob "${glob}" ignored: ${messageOf(error)}`);
    }
  }
  return matchers;
}

// ---- ignore rules ----

/** The .gitignore rules of a worktree, answered as git does, from memory. */
class IgnoreRules {
  /** Repository-relative directory ("" or "a/b/") → the rules of its .gitignore. */
  private readonly perDirectory = new Map<string, Ignore>();
  private readonly verdicts = new Map<string, boolean>();

  /**
   * `prefix`: the worktree's path in its repository ("" or "sub/dir/"). `repositoryWide`: rule lists
   * that apply to every path, in the order git consults them ($GIT_DIR/info/exclude, then core.excludesFile).
   */
  constructor(
    private readonly prefix: string,
    private readonly repositoryWide: readonly Ignore[],
    private readonly ignoreCase: boolean,
  ) {}

  /** The rules of the .gitignore in repository-relative directory `dir` ("" or "a/b/"). */
  add(dir: string, rules: Ignore): void {
    this.perDirectory.set(dir, rules);
    this.verdicts.clear();
  }

  /**
   * Git's rule: a directory above the path that is ignored settles it (nothing below an ignored
   * directory can be re-included); else the path's own verdict.
   */
  isIgnored(rel: string): boolean {
    const path = this.prefix + rel;
    if (path === "") return false;
    for (let slash = path.indexOf("/"); slash !== -1 && slash < path.length - 1; slash = path.indexOf("/", slash + 1)) {
      if (this.verdict(path.slice(0, slash + 1))) return true;
    }
    return this.verdict(path);
  }

  /**
   * One path's own verdict (its directories already known not to be ignored): the lists are consulted
   * deepest .gitignore first, then the repository-wide ones; the first with a rule matching the path
   * decides, and within a list the last matching rule does.
   */
  private verdict(path: string): boolean {
    const known = this.verdicts.get(path);
    if (known !== undefined) return known;
    const decided = this.decide(path);
    if (this.verdicts.size >= MAX_VERDICTS) this.verdicts.clear();
    this.verdicts.set(path, decided);
    return decided;
  }

  private decide(path: string): boolean {
    for (const dir of directoriesAbove(path)) {
      const rules = this.perDirectory.get(dir);
      const result = rules && this.ownResult(rules, path.slice(dir.length));
      if (result?.ignored || result?.unignored) return result.ignored;
    }
    for (const rules of this.repositoryWide) {
      const result = this.ownResult(rules, path);
      if (result.ignored || result.unignored) return result.ignored;
    }
    return false;
  }

  /**
   * What the rules of ONE list say of `path` itself. `ignore` lets a directory above the path that the
   * list ignores decide; when a deeper .gitignore re-included that directory (`!build/`), git looks at
   * the path's own name instead. Then the list is asked again with those directories re-included
   * (an anchored `!/dir/` matches that directory only): rare, so built on demand.
   */
  private ownResult(rules: Ignore, path: string): ReturnType<Ignore["test"]> {
    const parent = directoriesAbove(path)[0] ?? "";
    if (parent === "" || !rules.test(parent).ignored) return rules.test(path);
    const reincluded = ignore({ ignorecase: this.ignoreCase }).add(rules);
    for (let slash = parent.indexOf("/"); slash !== -1; slash = parent.indexOf("/", slash + 1)) {
      reincluded.add({ pattern: `!/${escapeWildmatch(parent.slice(0, slash))}/` });
    }
    return reincluded.test(path);
  }
}

/** The directories that hold `path` ("a/b/c" or "a/b/c/"), deepest first: "a/b/", "a/", "". */
function directoriesAbove(path: string): string[] {
  const dirs: string[] = [];
  for (let end = path.lastIndexOf("/", path.length - 2); end > 0; end = path.lastIndexOf("/", end - 1)) dirs.push(path.slice(0, end + 1));
  dirs.push("");
  return dirs;
}

/**
 * Literal text as a wildmatch pattern (git's globs: .gitignore patterns and `:(glob)` pathspecs): the
 * characters that start a wildcard, and the escape itself, are escaped. `!`, `#` and spaces are special
 * only at a pattern's ends, where the callers never put them.
 */
export function escapeWildmatch(text: string): string {
  return text.replace(/[\\*?[]/g, "\\$&");
}

/**
 * The rule list of one ignore file's text. Git skips a UTF-8 BOM. A pattern `ignore` cannot compile,
 * or one too costly to match (see MAX_GLOBSTARS), is left out and reported.
 */
function parseIgnoreFile(text: string, ignoreCase: boolean, where: string, log: Log): Ignore {
  const rules = ignore({ ignorecase: ignoreCase });
  for (const line of text.replace(/^\uFEFF/, "").split(/\r?\n/)) {
    if (line.startsWith("#")) continue;
    if ((line.match(/\*\*/g)?.length ?? 0) > MAX_GLOBSTARS) {
      log("warn", `${where}: pattern "${line.slice(0, 200)}" left out: more than ${MAX_GLOBSTARS} "**" are too costly to match`);
      continue;
    }
    try {
      rules.add(line);
    } catch (error) {
      log("warn", `${where}: pattern "${line.slice(0, 200)}" left out (${messageOf(error)})`);
    }
  }
  return rules;
}

/**
 * The text of an ignore file, at most MAX_IGNORE_FILE_BYTES (cut at a line end), or undefined when it
 * is absent or not a regular file. Inside the worktree a symlinked .gitignore is not followed (nor does
 * git follow it); `followLinks` is for the user's own files (core.excludesFile).
 */
async function readIgnoreFile(path: string, followLinks: boolean, log: Log): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | (followLinks ? 0 : constants.O_NOFOLLOW));
  } catch {
    return undefined;
  }
  try {
    if (!(await handle.stat()).isFile()) return undefined;
    const buffer = Buffer.alloc(MAX_IGNORE_FILE_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length <= MAX_IGNORE_FILE_BYTES) return buffer.toString("utf8", 0, length);
    log("warn", `${path} is larger than ${MAX_IGNORE_FILE_BYTES} bytes: its patterns past that are not used`);
    return buffer.toString("utf8", 0, buffer.lastIndexOf(10, MAX_IGNORE_FILE_BYTES) + 1);
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

// ---- listing ----

interface Listing {
  readonly source: "git" | "walk";
  /** Every candidate seen, before ignore rules are applied. */
  readonly candidates: readonly string[];
  readonly rules: IgnoreRules;
  readonly truncated: boolean;
  readonly why: string;
}

/** Paths examined so far, against maxEntries. */
class Budget {
  private used = 0;
  /** A path was refused: the listing is incomplete. */
  overflowed = false;
  constructor(readonly limit: number) {}
  /** Counts one more path; false once the limit is reached (that path and all after it are not examined). */
  take(): boolean {
    if (this.used >= this.limit) {
      this.overflowed = true;
      return false;
    }
    this.used++;
    return true;
  }
}

/**
 * Pathspecs that keep git's listing to what may be a candidate (every context file name, .gitignore
 * files, and the literal directory each rules glob starts with): a worktree of 30,000 files lists a
 * few thousand names, not megabytes of paths. Undefined when a rules glob has no literal directory
 * (`**\/*.md`): then everything is listed and classified here.
 */
function candidatePathspecs(options: IndexOptions): string[] | undefined {
  const names = contextNamesOf(options.fileNames);
  const specs = [...names.base, ...names.override, ...names.local, ".gitignore"].map((name) => `:(glob)**/${escapeWildmatch(name)}`);
  for (const glob of options.rules) {
    const literal: string[] = [];
    for (const segment of glob.split("/")) {
      if (/[*?[\]{}()!+@\\]/.test(segment)) break;
      literal.push(segment);
    }
    // A glob whose every segment is literal names one file; its directory is what is listed.
    if (literal.length === glob.split("/").length) literal.pop();
    if (literal.length === 0) return undefined;
    specs.push(`:(glob)${escapeWildmatch(literal.join("/"))}/**`);
  }
  return specs;
}

/**
 * The git listing, or undefined when git is absent, fails, or is too slow (the walk is used then).
 * All of git's commands run at once; paths stream in (a monorepo lists hundreds of thousands).
 */
async function listWithGit(
  options: IndexOptions,
  localNames: readonly string[],
  classify: Classifier,
  budget: Budget,
  log: Log,
): Promise<Listing | undefined> {
  const git = new GitRunner(options.worktree, options.gitTimeoutMs ?? GIT_TIMEOUT_MS);
  const candidates: string[] = [];
  const gitignores: string[] = [];
  let tooDeep = false;
  const take = (rel: string): void => {
    if (rel.endsWith("/")) return; // a nested repository, or (with --directory) an ignored directory as a whole
    if (outOfReach(rel)) {
      tooDeep = true;
      return;
    }
    if (rel === ".gitignore" || rel.endsWith("/.gitignore")) gitignores.push(rel);
    if (classify(rel) !== undefined) candidates.push(rel);
  };
  // Pathspecs are relative to the worktree (git's cwd); glob magic so `**/` crosses directories.
  const ignoredPathspecs = [...localNames, ".gitignore"].map((name) => `:(glob)**/${escapeWildmatch(name)}`);
  const listedPathspecs = candidatePathspecs(options);
  const [layout, excludesFile, ignoreCase, tracked, ignored] = await Promise.all([
    git.output(["rev-parse", "--show-toplevel", "--show-prefix", "--git-path", "info/exclude"]),
    git.output(["config", "--get", "--type=path", "core.excludesFile"]),
    git.output(["config", "--get", "--type=bool", "core.ignoreCase"]),
    git.list(["ls-files", "-z", "--cached", "--others", "--exclude-standard", ...(listedPathspecs === undefined ? [] : ["--", ...listedPathspecs])], budget, take),
    // Local variants are usually ignored, and a .gitignore may ignore itself (`*` in .venv/.gitignore) yet
    // applies: both are asked for among ignored files. --directory keeps git out of ignored directories.
    git.list(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", ...ignoredPathspecs], budget, take),
  ]);
  // `git config --get` exits with 1 when the key is not set: that is an answer, not a failure.
  const failed = [layout, tracked, ignored, excludesFile, ignoreCase].find((run): run is GitFailure => !run.ok && run.code !== 1);
  const lines = layout.ok ? layout.stdout.split("\n") : [];
  if (failed !== undefined || lines.length !== 4) {
    log("info", `worktree index: git did not list the worktree (${failed?.why ?? "unexpected rev-parse output"}); walking it instead`);
    return undefined;
  }
  const [toplevel = "", prefix = "", excludePath = ""] = lines;
  const caseless = ignoreCase.ok && ignoreCase.stdout.trim() === "true";
  const userFile = excludesFile.ok ? excludesFile.stdout.replace(/\n$/, "") : defaultExcludesFile();
  const repositoryWide = await Promise.all([
    readIgnoreFile(resolve(options.worktree, excludePath), true, log),
    userFile === undefined ? undefined : readIgnoreFile(resolve(options.worktree, userFile), true, log),
  ]);
  const rules = new IgnoreRules(
    prefix,
    repositoryWide.flatMap((text, i) => (text === undefined ? [] : [parseIgnoreFile(text, caseless, i === 0 ? excludePath : (userFile ?? ""), log)])),
    caseless,
  );
  // The .gitignore files of the directories above the worktree (up to the repository's top) apply too.
  const above = prefix === "" ? [] : directoriesAbove(prefix);
  await readGitignores(
    [...above.map((dir) => ({ dir, path: join(toplevel, dir, ".gitignore") })), ...gitignores.map((rel) => ({ dir: prefix + rel.slice(0, -".gitignore".length), path: join(options.worktree, rel) }))],
    rules,
    caseless,
    log,
  );
  const why = budget.overflowed ? `git listed more than maxEntries (${options.maxEntries}) paths` : `paths deeper than ${MAX_DEPTH} levels are left out`;
  return { source: "git", candidates, rules, truncated: budget.overflowed || tooDeep, why };
}

/** Reads the given .gitignore files, a few at a time, into `rules`. */
async function readGitignores(files: readonly { dir: string; path: string }[], rules: IgnoreRules, ignoreCase: boolean, log: Log): Promise<void> {
  const texts = await inBatches(files, WALK_CONCURRENCY, (file) => readIgnoreFile(file.path, false, log));
  files.forEach((file, i) => {
    const text = texts[i];
    if (text !== undefined) rules.add(file.dir, parseIgnoreFile(text, ignoreCase, file.path, log));
  });
}

async function inBatches<T, R>(items: readonly T[], size: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += size) results.push(...(await Promise.all(items.slice(start, start + size).map(work))));
  return results;
}

/** Git's default core.excludesFile: $XDG_CONFIG_HOME/git/ignore, or ~/.config/git/ignore. */
function defaultExcludesFile(): string | undefined {
  const xdg = process.env.XDG_CONFIG_HOME;
  if (xdg) return join(xdg, "git", "ignore");
  const home = process.env.HOME || homedir();
  return home ? join(home, ".config", "git", "ignore") : undefined;
}

interface GitFailure {
  readonly ok: false;
  readonly code: number | null;
  readonly why: string;
}
type GitResult = { readonly ok: true; readonly stdout: string } | GitFailure;

/** Runs git commands in the worktree, all under one deadline: past it, every one still running is killed. */
class GitRunner {
  private readonly deadline: AbortSignal;
  /** Spawns run one per event-loop task: each costs a few ms of the loop, five at once a stall. */
  private spawned: Promise<void> = Promise.resolve();
  constructor(
    private readonly cwd: string,
    timeoutMs: number,
  ) {
    this.deadline = AbortSignal.timeout(timeoutMs);
  }

  /** A short command's whole output. */
  output(args: readonly string[]): Promise<GitResult> {
    let stdout = "";
    return this.run(args, (chunk) => {
      stdout += chunk.toString("utf8");
      return stdout.length < MAX_PATH_BYTES;
    }).then((result) => (result.ok ? { ...result, stdout } : result));
  }

  /** A `-z` listing, path by path, without holding the whole output. Stops (killing git) once `budget` is spent. */
  list(args: readonly string[], budget: Budget, onPath: (rel: string) => void): Promise<GitResult> {
    let pending: Buffer = Buffer.alloc(0);
    return this.run(args, (chunk) => {
      const data = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let start = 0;
      for (let end = data.indexOf(0); end !== -1; start = end + 1, end = data.indexOf(0, start)) {
        if (!budget.take()) return "stop";
        const rel = data.toString("utf8", start, end);
        if (!rel.includes(UNDECODABLE)) onPath(rel);
      }
      pending = data.subarray(start);
      return pending.length < MAX_PATH_BYTES;
    });
  }

  /**
   * Spawns git (no shell) and feeds its stdout to `onData`, which answers whether to go on (`false`: the
   * output is refused, a failure; "stop": enough was read, a success).
   */
  private run(args: readonly string[], onData: (chunk: Buffer) => boolean | "stop"): Promise<GitResult> {
    const turn = this.spawned.then(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));
    this.spawned = turn;
    return turn.then(() => this.spawn(args, onData));
  }

  private spawn(args: readonly string[], onData: (chunk: Buffer) => boolean | "stop"): Promise<GitResult> {
    return new Promise((settle) => {
      let refused = false;
      let stopped = false;
      let stderr = "";
      let child;
      try {
        child = spawn("git", args, { cwd: this.cwd, stdio: ["ignore", "pipe", "pipe"], signal: this.deadline, killSignal: "SIGKILL" });
      } catch (error) {
        settle({ ok: false, code: null, why: messageOf(error) });
        return;
      }
      child.stdout.on("data", (chunk: Buffer) => {
        if (refused || stopped) return;
        const verdict = onData(chunk);
        if (verdict === true) return;
        if (verdict === "stop") stopped = true;
        else refused = true;
        child.kill("SIGKILL");
      });
      child.stderr.on("data", (chunk: Buffer) => {
        if (stderr.length < 1000) stderr += chunk.toString("utf8");
      });
      let failure: string | undefined;
      child.on("error", (error) => {
        failure = this.deadline.aborted ? "timed out" : error.message;
        // Never started (git absent): no "close" is owed.
        if (child.pid === undefined) settle({ ok: false, code: null, why: failure });
      });
      child.on("close", (code) => {
        if (stopped || (failure === undefined && !refused && code === 0)) settle({ ok: true, stdout: "" });
        else {
          const why = failure ?? (refused ? "output not understood" : `git ${args[0]} exited with ${code}: ${stderr.trim().split("\n")[0] ?? ""}`);
          settle({ ok: false, code, why });
        }
      });
    });
  }
}

/**
 * The walk: every directory from the worktree down that is not ignored, reading each .gitignore before
 * judging the entries beside it. Never follows a symlink (a symlinked directory is an entry, as git
 * lists it), never enters `.git` or a nested repository (git lists neither), never goes deeper than
 * MAX_DEPTH, and examines at most maxEntries entries.
 */
async function listWithWalk(worktree: string, classify: Classifier, budget: Budget, log: Log): Promise<Listing> {
  // Without git, its configuration is unknown: case follows the platform's usual filesystem.
  const ignoreCase = process.platform === "darwin" || process.platform === "win32";
  const exclude = await readIgnoreFile(join(worktree, ".git", "info", "exclude"), false, log);
  const rules = new IgnoreRules("", exclude === undefined ? [] : [parseIgnoreFile(exclude, ignoreCase, ".git/info/exclude", log)], ignoreCase);
  const candidates: string[] = [];
  let tooDeep = false;
  const visit = async (dir: string, depth: number): Promise<string[]> => {
    const entries = await readEntries(join(worktree, dir), budget);
    // A directory holding `.git` is another repository: git lists it as a whole, never its files.
    if (dir !== "" && entries.some((entry) => entry.name === ".git")) return [];
    if (entries.some((entry) => entry.name === ".gitignore" && entry.isFile())) {
      const text = await readIgnoreFile(join(worktree, dir, ".gitignore"), false, log);
      if (text !== undefined) rules.add(dir, parseIgnoreFile(text, ignoreCase, join(dir, ".gitignore"), log));
    }
    const subdirectories: string[] = [];
    for (const entry of entries) {
      if (entry.name === ".git" || entry.name.includes(UNDECODABLE)) continue;
      if (entry.isDirectory()) {
        const rel = `${dir}${entry.name}/`;
        if (rules.isIgnored(rel)) continue;
        if (depth + 1 > MAX_DEPTH) tooDeep = true;
        else subdirectories.push(rel);
      } else if ((entry.isFile() || entry.isSymbolicLink()) && classify(dir + entry.name) !== undefined) {
        candidates.push(dir + entry.name);
      }
    }
    return subdirectories;
  };
  await drain([{ dir: "", depth: 0 }], WALK_CONCURRENCY, async ({ dir, depth }) => (await visit(dir, depth)).map((sub) => ({ dir: sub, depth: depth + 1 })));
  const why = budget.overflowed ? `the walk reached maxEntries (${budget.limit}) entries` : `directories deeper than ${MAX_DEPTH} levels are left out`;
  return { source: "walk", candidates, rules, truncated: budget.overflowed || tooDeep, why };
}

/**
 * A directory's entries, as many as the budget allows (the directory itself counts as one); none when
 * it cannot be read (gone, no permission).
 */
async function readEntries(path: string, budget: Budget): Promise<Dirent[]> {
  const entries: Dirent[] = [];
  if (!budget.take()) return entries;
  try {
    const handle = await opendir(path, { bufferSize: 256 });
    try {
      for (let entry = await handle.read(); entry !== null && budget.take(); entry = await handle.read()) entries.push(entry);
    } finally {
      await handle.close();
    }
  } catch {
    // Unreadable or gone since it was listed: what it held cannot be known, as for git.
  }
  return entries;
}

/**
 * Runs `work` on every job and on the jobs it returns, `concurrency` at a time, until none is left.
 * Breadth first: when the budget runs out, the shallow directories are the ones examined.
 */
function drain<J>(initial: readonly J[], concurrency: number, work: (job: J) => Promise<J[]>): Promise<void> {
  const queue = [...initial];
  let next = 0;
  let active = 0;
  return new Promise((done, fail) => {
    const pump = (): void => {
      for (; active < concurrency && next < queue.length; next++) {
        const job = queue[next] as J;
        active++;
        work(job)
          .then((more) => {
            for (const job of more) queue.push(job);
          }, fail)
          .finally(() => {
            active--;
            pump();
          });
      }
      if (active === 0 && next === queue.length) done();
    };
    pump();
  });
}

// ---- the index ----

class Index implements WorktreeIndex {
  readonly source: "git" | "walk";
  private readonly rules: IgnoreRules;
  private readonly loadable = new Set<string>();
  private sorted: readonly string[] | undefined;
  private cut: boolean;

  constructor(
    listed: Listing,
    private readonly classify: Classifier,
    private readonly maxEntries: number,
    private readonly log: Log,
  ) {
    this.source = listed.source;
    this.rules = listed.rules;
    this.cut = listed.truncated;
  }

  /** Keeps the candidates that may load: judged in slices (each asks the ignore rules of every directory above it). */
  async fill(candidates: readonly string[]): Promise<void> {
    let sliceEnd = performance.now() + FILL_SLICE_MS;
    for (const rel of candidates) {
      if (performance.now() > sliceEnd) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        sliceEnd = performance.now() + FILL_SLICE_MS;
      }
      if (this.mayLoad(rel)) this.loadable.add(rel);
    }
    this.sorted = undefined;
  }

  get files(): readonly string[] {
    this.sorted ??= Object.freeze([...this.loadable].sort());
    return this.sorted;
  }

  get truncated(): boolean {
    return this.cut;
  }

  isIgnored(rel: string): boolean {
    const path = normalizeRel(rel);
    return path !== undefined && (outOfReach(path) || this.rules.isIgnored(path));
  }

  mayLoad(rel: string): boolean {
    const path = normalizeRel(rel);
    if (path === undefined || path === "" || path.endsWith("/") || outOfReach(path)) return false;
    const kind = this.classify(path);
    if (kind === undefined) return false;
    if (kind === "other") return !this.rules.isIgnored(path);
    return !this.rules.isIgnored(path.slice(0, path.lastIndexOf("/") + 1));
  }

  update(changedRel: string, exists: boolean): IndexChange {
    const path = normalizeRel(changedRel)?.replace(/\/$/, "");
    if (path === undefined || path === "") return "unchanged";
    if (path === ".gitignore" || path.endsWith("/.gitignore")) return "rebuild";
    const before = this.loadable.size;
    if (!exists) {
      this.loadable.delete(path);
      for (const rel of this.loadable) if (rel.startsWith(`${path}/`)) this.loadable.delete(rel);
    } else if (!this.loadable.has(path) && this.mayLoad(path)) {
      if (this.loadable.size >= this.maxEntries) {
        if (!this.cut) this.log("warn", `worktree index: ${this.maxEntries} context files listed (maxEntries); ${path} and later ones are not`);
        this.cut = true;
        return "unchanged";
      }
      this.loadable.add(path);
    }
    if (this.loadable.size === before) return "unchanged";
    this.sorted = undefined;
    return "changed";
  }
}

/**
 * A worktree-relative path in the index's form ("a/b", "a/b/" for a directory, "" for the worktree),
 * or undefined when it leaves the worktree (absolute, or `..` above it).
 */
function normalizeRel(rel: string): string | undefined {
  if (rel === "" || rel === "." || rel === "./") return "";
  if (rel.startsWith("/")) return undefined;
  const path = posix.normalize(rel);
  if (path === ".." || path.startsWith("../")) return undefined;
  return path === "./" || path === "." ? "" : path;
}

/** Deeper than MAX_DEPTH directory levels ("a/b/" is 2 levels, "a/b/c" a file in them), or too long to open. */
function outOfReach(path: string): boolean {
  if (path.length > MAX_PATH_CHARS) return true;
  let slashes = 0;
  for (let at = path.indexOf("/"); at !== -1 && at < path.length - 1; at = path.indexOf("/", at + 1)) slashes++;
  return slashes + (path.endsWith("/") ? 1 : 0) > MAX_DEPTH;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
