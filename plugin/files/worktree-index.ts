import { accessSync, closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, statSync, type Dirent } from "node:fs";
import { homedir } from "node:os";
import { join, posix, resolve } from "node:path";
import ignore, { type Ignore } from "ignore";
import { fsPromises } from "../libraries.ts";
import { optionGlobs } from "../rules/contract.ts";
import { contextNamesOf } from "./names.ts";
import { lowerBound, prefixRun } from "../sorted.ts";
import { inSlices } from "../turns.ts";
import { isInside, realPathOr } from "../paths.ts";

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
  /** git's settings of ignoring, when the caller asked for them already (readIgnoreBasis); else asked here. */
  readonly basis?: Promise<IgnoreBasisResult>;
}

/**
 * What `update` did: `files` changed, or not, or the change was to a `.gitignore` (the rules of
 * ignoring changed: build the index again; this one stays usable meanwhile).
 */
export type IndexChange = "changed" | "unchanged" | "rebuild";

/** What is at a path now, as update is told. */
export type PathKind = "file" | "directory" | "gone";

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
   * What is at `changedRel` now (a watcher saw it change): a file (it enters `files` if it may load,
   * and nothing stays listed under it), a directory (it is never listed itself; what is under it
   * stays), or nothing (it and everything under it leave). Synchronous, so a watcher event seen
   * before a step shows in that step.
   */
  update(changedRel: string, now: PathKind): IndexChange;
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
/** The index works (the candidates' verdicts, the .gitignore files it reads) in event-loop slices this long at most. */
const FILL_SLICE_MS = 4;
/** Directories the walk reads at once. */
const WALK_CONCURRENCY = 16;
/**
 * Directory verdicts remembered per index; past it they are forgotten together (each is cheap to
 * compute again: one lstat, and the lists above it). 4,096, not 8,192: JavaScriptCore's Map table
 * quadruples past 4,096 entries (160 KB to 640 KB), and with the keys and verdicts a 2,000-directory
 * session held 1 MiB more for no measurable gain (a pass over 10,000 directories' verdicts after the
 * index's build took the same 60-200 ms either way).
 */
const MAX_VERDICTS = 4_096;
/**
 * What a name that is not valid UTF-8 decodes to: such a file cannot be opened through a JS string,
 * so a path holding it is passed over (by git and the walk alike; a real U+FFFD in a name is lost too).
 */
const UNDECODABLE = "\uFFFD";
/** A path in git's output longer than this is not a path: the output is refused. */
const MAX_PATH_BYTES = 64 * 1024;

/**
 * Lists the context file candidates of the worktree: through git when it answers (tracked and
 * untracked-not-ignored files, plus ignored local variants), else through a walk that honours every
 * .gitignore on its way. Never reads a context file; reads ignore files only.
 */
export async function buildWorktreeIndex(options: IndexOptions): Promise<WorktreeIndex> {
  const log = options.log ?? (() => {});
  const names = contextNamesOf(options.fileNames);
  const rules = compileRules(options.rules, log);
  const classify = candidateClassifier(names, rules.matches);
  const basis = options.basis ?? readIgnoreBasis(options.worktree, log, options.gitTimeoutMs);
  // Git lists what the globs kept may match (a `!` glob only takes away): a glob refused is no pathspec either.
  const listing = { ...options, rules: rules.kept.filter((glob) => !/^(?:!!)*!(?!!)/.test(glob)) };
  const listed =
    (await listWithGit(listing, names.local, classify, new Budget(options.maxEntries), log, basis)) ??
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

function candidateClassifier(names: ReturnType<typeof contextNamesOf>, isRule: (rel: string) => boolean): Classifier {
  const local = new Set(names.local);
  const other = new Set([...names.base, ...names.override]);
  return (rel) => {
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    if (local.has(name)) return "local";
    if (other.has(name)) return "other";
    return isMarkdown(name) && isRule(rel) ? "other" : undefined;
  };
}

const isMarkdown = (name: string): boolean => name.length > 3 && name.slice(-3).toLowerCase() === ".md";

/** A candidate as listed: its worktree-relative path (normalized, within reach) and its kind. */
interface Candidate {
  readonly rel: string;
  readonly kind: Kind;
}

/**
 * The `rules` option's globs, matched as frontmatter globs are (rules/contract.ts: bounded time, where
 * a regular expression's backtracking took seconds for `*-*-*-*-*-*-*-x.md` against a long name of
 * dashes); each that does not parse or leaves the worktree is logged and costs only itself.
 */
function compileRules(globs: readonly string[], log: Log): { readonly matches: (rel: string) => boolean; readonly kept: readonly string[] } {
  return optionGlobs(globs, (reason) => log("warn", `rules option: ${reason}; that glob is ignored`));
}

// ---- ignore rules ----

/** A rule list (a .gitignore, or a repository-wide list), and the directory its patterns are relative to ("" or "a/b/"). */
interface GitignoreList {
  readonly dir: string;
  readonly rules: Ignore;
}

/** What is known of a directory ("" or "a/b/") once asked about. */
interface DirectoryVerdict {
  /** It, or a directory above it, is ignored. */
  readonly ignored: boolean;
  /** It lies in a nested repository (its top included): only that repository's rules judge what is in it. */
  readonly nested: boolean;
  /** The .gitignore lists that judge the paths in it, deepest first, up to its repository's top (shared with its parent when it has none). */
  readonly lists: readonly GitignoreList[];
  /** The repository-wide lists of the repository it lies in, in git's order, relative to that repository's top. */
  readonly wide: readonly GitignoreList[];
}

/** What IgnoreRules is built from: git's settings of ignoring, and where to read what no listing gave. */
interface IgnoreSetting {
  /** The worktree's path in its repository ("" or "sub/dir/"). */
  readonly prefix: string;
  readonly ignoreCase: boolean;
  /** The repository's $GIT_DIR/info/exclude: it applies to every path of the repository, and to no nested one. */
  readonly exclude: Ignore | undefined;
  /** core.excludesFile: the user's own list, which git applies in every repository, nested ones included. */
  readonly userExcludes: Ignore | undefined;
  /** Real absolute path of the worktree. */
  readonly worktree: string;
  /** The repository's (common) git directory: a nested repository's `.git` file is followed only into it. */
  readonly gitDir: string;
  /**
   * Which ignore files are read from disk the first time their directory is judged (one open and one
   * read each): "everywhere" before any listing (NearIgnores; a directory holding `.git` starts a nested
   * repository), "nested" after one (the index: git's listing, or the walk, gave every .gitignore but
   * those in nested repositories, which neither enters, and named the repositories' tops). A listing
   * cut short (maxEntries) did not give them all: "everywhere" then too.
   */
  readonly reads: "everywhere" | "nested";
  readonly log: Log;
}

/**
 * The ignore rules of a worktree, answered as git does, from memory. A nested repository (a
 * submodule, a clone inside the worktree) is judged as git judges it in that repository: its own
 * .gitignore files, its info/exclude and core.excludesFile, none of the outer repository's lists.
 */
class IgnoreRules {
  /** Repository-relative directory ("" or "a/b/") → the rules of its .gitignore. */
  private readonly perDirectory = new Map<string, Ignore>();
  /** Repository-relative top ("a/b/") of each nested repository → its repository-wide lists. */
  private readonly repositories = new Map<string, readonly GitignoreList[]>();
  /** The files of a directory share its verdict and lists: each is worked out once. */
  private readonly directories = new Map<string, DirectoryVerdict>();
  /** The outer repository's repository-wide lists, in the order git consults them. */
  private readonly outerWide: readonly GitignoreList[];
  private reads: IgnoreSetting["reads"];

  constructor(private readonly setting: IgnoreSetting) {
    this.reads = setting.reads;
    this.outerWide = [setting.exclude, setting.userExcludes].filter((rules) => rules !== undefined).map((rules) => ({ dir: "", rules }));
  }

  /** The rules of the .gitignore in repository-relative directory `dir` ("" or "a/b/"). */
  add(dir: string, rules: Ignore): void {
    this.perDirectory.set(dir, rules);
    this.directories.clear();
  }

  /** From now on every directory's ignore files are read when it is judged (a listing was cut short: see IgnoreSetting.reads). */
  readEverywhere(): void {
    this.reads = "everywhere";
    this.directories.clear();
  }

  /** A nested repository's top ("a/b/", repository-relative), as a listing found it: what is below it is judged by its own rules. */
  addRepository(dir: string): void {
    this.startRepository(dir);
    this.directories.clear();
  }

  /**
   * Git's rule: a directory above the path that is ignored settles it (nothing below an ignored
   * directory can be re-included); else the path's own verdict.
   */
  isIgnored(rel: string): boolean {
    const path = this.setting.prefix + rel;
    if (path === "") return false;
    if (path.endsWith("/")) return this.directory(path).ignored;
    const parent = this.directory(parentOf(path));
    return parent.ignored || this.decide(path, parent);
  }

  private directory(dir: string): DirectoryVerdict {
    const known = this.directories.get(dir);
    if (known !== undefined) return known;
    const parent = dir === "" ? undefined : this.directory(parentOf(dir));
    // A directory is judged by the lists above it (a nested repository's top by the outer repository's).
    const ignored = parent !== undefined && (parent.ignored || this.decide(dir, parent));
    // What is below an ignored directory is ignored whatever its own files say: they are not read.
    if (!ignored) this.readOnDemand(dir, parent);
    const rules = this.perDirectory.get(dir);
    const own = rules === undefined ? [] : [{ dir, rules }];
    const topOf = this.repositories.get(dir);
    let verdict: DirectoryVerdict;
    if (parent === undefined) verdict = { ignored, nested: false, lists: own, wide: this.outerWide };
    else if (topOf !== undefined) verdict = { ignored, nested: true, lists: own, wide: topOf };
    // Most directories have no .gitignore and share their parent's answer: its verdict object serves
    // them too (7,452 objects of the same four values for a 2,000-directory session, 350 KB).
    else if (rules === undefined && ignored === parent.ignored) verdict = parent;
    else verdict = { ignored, nested: parent.nested, lists: rules === undefined ? parent.lists : [...own, ...parent.lists], wide: parent.wide };
    if (this.directories.size >= MAX_VERDICTS) this.directories.clear();
    this.directories.set(dir, verdict);
    return verdict;
  }

  /**
   * Reads the ignore files of `dir` that no listing gave (see IgnoreSetting.reads), each time its
   * verdict is worked out (once, unless the bounded cache of verdicts forgot it: then again, which
   * also sees an edit). Directories above the worktree were read with the basis. Nothing below `dir`
   * has a verdict yet, so none is forgotten.
   */
  private readOnDemand(dir: string, parent: DirectoryVerdict | undefined): void {
    const { prefix, worktree, ignoreCase, log } = this.setting;
    const reads = this.reads;
    if (dir.length < prefix.length) return;
    const path = join(worktree, dir.slice(prefix.length));
    // A directory holding `.git` starts a nested repository, whether a listing named it or not: an
    // embedded repository `git add`ed without .gitmodules is a gitlink that no pathspec of the listing
    // matches, and no listing enters a nested repository (one lstat a verdict).
    if (dir !== prefix && !this.repositories.has(dir) && holdsGit(path)) this.startRepository(dir);
    // After a listing, only a nested repository's .gitignore files are read: the listing gave the others.
    if (reads === "nested" && parent?.nested !== true && !this.repositories.has(dir)) return;
    const rules = readIgnoreList(join(path, ".gitignore"), false, ignoreCase, log);
    if (rules !== undefined) this.perDirectory.set(dir, rules);
    else this.perDirectory.delete(dir);
  }

  /** Records the nested repository whose top is `dir`: its info/exclude (when cheaply found) and core.excludesFile apply in it. */
  private startRepository(dir: string): void {
    const exclude = nestedExclude(join(this.setting.worktree, dir.slice(this.setting.prefix.length)), this.setting);
    this.repositories.set(
      dir,
      [exclude, this.setting.userExcludes].filter((rules) => rules !== undefined).map((rules) => ({ dir, rules })),
    );
  }

  /**
   * One path's own verdict (its directories known not to be ignored): the lists of the .gitignore files
   * above it in its repository are consulted deepest first, then that repository's repository-wide
   * ones; the first with a rule matching the path decides, and within a list the last matching rule does.
   */
  private decide(path: string, verdict: DirectoryVerdict): boolean {
    for (const lists of [verdict.lists, verdict.wide]) {
      for (const { dir, rules } of lists) {
        const result = this.ownResult(rules, path.slice(dir.length));
        if (result.ignored || result.unignored) return result.ignored;
      }
    }
    return false;
  }

  /**
   * What the rules of ONE list say of `path` itself. `ignore` lets a directory above the path that the
   * list ignores decide (so only an "ignored" answer may be its); when a deeper .gitignore re-included
   * that directory (`!build/`), git looks at the path's own name instead. Then the list is asked again
   * with those directories re-included (an anchored `!/dir/` matches that directory only): rare, so
   * built on demand.
   */
  private ownResult(rules: Ignore, path: string): ReturnType<Ignore["test"]> {
    const result = rules.test(path);
    if (!result.ignored) return result;
    const parent = parentOf(path);
    if (parent === "" || !rules.test(parent).ignored) return result;
    const reincluded = ignore({ ignorecase: this.setting.ignoreCase }).add(rules);
    for (let slash = parent.indexOf("/"); slash !== -1; slash = parent.indexOf("/", slash + 1)) {
      reincluded.add({ pattern: `!/${escapeWildmatch(parent.slice(0, slash))}/` });
    }
    return reincluded.test(path);
  }
}

/**
 * The info/exclude of the nested repository at `top` (absolute), or undefined when it has none or it
 * is not cheaply found: `.git` a directory, or a `.git` file (a submodule's) whose `gitdir:` leads
 * into the outer repository's git directory (where git keeps its submodules); one leading elsewhere
 * is not followed.
 */
function nestedExclude(top: string, setting: IgnoreSetting): Ignore | undefined {
  const dotGit = join(top, ".git");
  let gitDir = dotGit;
  if (lstatSync(dotGit, { throwIfNoEntry: false })?.isDirectory() !== true) {
    const target = /^gitdir: (.+)$/m.exec(readIgnoreFile(dotGit, false, setting.log) ?? "")?.[1];
    if (target === undefined) return undefined;
    gitDir = realPathOr(resolve(top, target));
    if (!isInside(gitDir, realPathOr(setting.gitDir))) return undefined;
    // A linked worktree's git directory (`git worktree add`) names the repository's in `commondir`:
    // git reads that one's info/exclude there.
    const common = readIgnoreFile(join(gitDir, "commondir"), false, setting.log)?.trim();
    if (common !== undefined && common !== "") {
      gitDir = realPathOr(resolve(gitDir, common));
      if (!isInside(gitDir, realPathOr(setting.gitDir))) return undefined;
    }
  }
  return readIgnoreList(join(gitDir, "info", "exclude"), false, setting.ignoreCase, setting.log);
}

/** The directory that holds `path` ("a/b/c" or "a/b/c/"): "a/b/", or "" at the top. */
function parentOf(path: string): string {
  const end = path.lastIndexOf("/", path.length - 2);
  return end > 0 ? path.slice(0, end + 1) : "";
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
 * The rule list of one ignore file's text, or undefined when it has no pattern (a list that cannot match
 * is not asked about every path). Git skips a UTF-8 BOM. A pattern `ignore` cannot compile, or one too
 * costly to match (see MAX_GLOBSTARS), is left out and reported.
 */
function parseIgnoreFile(text: string, ignoreCase: boolean, where: string, log: Log): Ignore | undefined {
  const rules = ignore({ ignorecase: ignoreCase });
  let patterns = 0;
  for (const line of text.replace(/^\uFEFF/, "").split(/\r?\n/)) {
    if (line === "" || line.startsWith("#")) continue;
    if ((line.match(/\*\*/g)?.length ?? 0) > MAX_GLOBSTARS) {
      log("warn", `${where}: pattern "${line.slice(0, 200)}" left out: more than ${MAX_GLOBSTARS} "**" are too costly to match`);
      continue;
    }
    try {
      rules.add(line);
      patterns++;
    } catch (error) {
      log("warn", `${where}: pattern "${line.slice(0, 200)}" left out (${messageOf(error)})`);
    }
  }
  return patterns === 0 ? undefined : rules;
}

/**
 * The text of an ignore file, at most MAX_IGNORE_FILE_BYTES (cut at a line end), or undefined when it
 * is absent or not a regular file. Inside the worktree a symlinked .gitignore is not followed (nor does
 * git follow it); `followLinks` is for the user's own files (core.excludesFile). Synchronous: a few
 * microseconds each, and NearIgnores reads those on a new chain's way inside a step (an awaited read
 * would hand the loop to whatever else is queued). Opened without blocking, so a FIFO is refused.
 */
function readIgnoreFile(path: string, followLinks: boolean, log: Log): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (followLinks ? 0 : constants.O_NOFOLLOW));
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return undefined;
    // Sized by the file, not the limit; one byte more shows whether it grew since, and then the buffer grows.
    let buffer = Buffer.allocUnsafe(Math.min(stat.size, MAX_IGNORE_FILE_BYTES) + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        if (length > MAX_IGNORE_FILE_BYTES) break;
        const grown = Buffer.allocUnsafe(Math.min(length * 2, MAX_IGNORE_FILE_BYTES + 1));
        buffer.copy(grown);
        buffer = grown;
      }
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
    }
    if (length <= MAX_IGNORE_FILE_BYTES) return buffer.toString("utf8", 0, length);
    log("warn", `${path} is larger than ${MAX_IGNORE_FILE_BYTES} bytes: its patterns past that are not used`);
    return buffer.toString("utf8", 0, buffer.lastIndexOf(10, MAX_IGNORE_FILE_BYTES) + 1);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

// ---- listing ----

interface Listing {
  readonly source: "git" | "walk";
  /** Every candidate seen, before ignore rules are applied. */
  readonly candidates: readonly Candidate[];
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
 * files, and the literal directory each rules glob starts with) and to the nested repositories (`**\/`
 * matches only what git lists as a directory: a nested repository, among tracked and untracked
 * files): a worktree of 30,000 files lists a few thousand names, not megabytes of paths. Undefined
 * when a rules glob has no literal directory (`**\/*.md`): then everything is listed and classified here.
 */
function candidatePathspecs(options: IndexOptions): string[] | undefined {
  const names = contextNamesOf(options.fileNames);
  const specs = [...names.base, ...names.override, ...names.local, ".gitignore", ""].map((name) => `:(glob)**/${escapeWildmatch(name)}`);
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
  basisAsked: Promise<IgnoreBasisResult>,
): Promise<Listing | undefined> {
  const git = new GitRunner(options.worktree, options.gitTimeoutMs ?? GIT_TIMEOUT_MS);
  const candidates: Candidate[] = [];
  const gitignores: string[] = [];
  /** Worktree-relative tops of the nested repositories git came across (it lists each as one entry). */
  const repositories: string[] = [];
  let tooDeep = false;
  const take = (rel: string): void => {
    if (outOfReach(rel)) {
      tooDeep = true;
      return;
    }
    if (rel === ".gitignore" || rel.endsWith("/.gitignore")) gitignores.push(rel);
    const kind = classify(rel);
    if (kind !== undefined) candidates.push({ rel, kind });
  };
  // A directory as a whole: among tracked and untracked files, a nested repository; among ignored ones (--directory), an ignored directory.
  const takeListed = (rel: string): void => (rel.endsWith("/") ? void repositories.push(rel) : take(rel));
  const takeIgnored = (rel: string): void => (rel.endsWith("/") ? undefined : take(rel));
  // Pathspecs are relative to the worktree (git's cwd); glob magic so `**/` crosses directories.
  const ignoredPathspecs = [...localNames, ".gitignore"].map((name) => `:(glob)**/${escapeWildmatch(name)}`);
  const listedPathspecs = candidatePathspecs(options);
  // The listings first: they walk the worktree, the longest part.
  const [tracked, ignored, basis, submodules] = await Promise.all([
    git.list(["ls-files", "-z", "--cached", "--others", "--exclude-standard", ...(listedPathspecs === undefined ? [] : ["--", ...listedPathspecs])], budget, takeListed),
    // Local variants are usually ignored, and a .gitignore may ignore itself (`*` in .venv/.gitignore) yet
    // applies: both are asked for among ignored files. --directory keeps git out of ignored directories.
    git.list(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", ...ignoredPathspecs], budget, takeIgnored),
    basisAsked,
    basisAsked.then((basis) => (basis.ok ? checkedOutSubmodules(git, basis, options.worktree, log) : [])),
  ]);
  const failed = [tracked, ignored, basis].find((run) => !run.ok);
  if (failed !== undefined || !basis.ok) {
    log("info", `worktree index: git did not list the worktree (${failed?.why ?? "no answer"}); walking it instead`);
    return undefined;
  }
  // A listing cut short did not reach every .gitignore: the others are read as their directories are asked about.
  const rules = new IgnoreRules({ ...basis, worktree: options.worktree, reads: budget.overflowed ? "everywhere" : "nested", log });
  // The .gitignore files of the directories above the worktree (up to the repository's top) apply too.
  const gitignoreFiles = [
    ...aboveWorktree(basis),
    ...gitignores.map((rel) => ({ dir: basis.prefix + rel.slice(0, -".gitignore".length), path: join(options.worktree, rel) })),
  ];
  await addIgnoreFiles(rules, gitignoreFiles, basis.ignoreCase, log);
  for (const rel of [...repositories, ...submodules]) rules.addRepository(basis.prefix + rel);
  const why = budget.overflowed ? `git listed more than maxEntries (${options.maxEntries}) paths` : `paths deeper than ${MAX_DEPTH} levels are left out`;
  return { source: "git", candidates, rules, truncated: budget.overflowed || tooDeep, why };
}

/** What git says of ignoring in a worktree besides the .gitignore files below it. */
export interface IgnoreBasis {
  readonly ok: true;
  /** The repository's top directory, and the worktree's path in it ("" or "sub/dir/"). */
  readonly toplevel: string;
  readonly prefix: string;
  /** $GIT_DIR/info/exclude: it applies to every path of the repository. */
  readonly exclude: Ignore | undefined;
  /** core.excludesFile: it applies to every path, after info/exclude, in nested repositories too. */
  readonly userExcludes: Ignore | undefined;
  /** The repository's (common) git directory, absolute. */
  readonly gitDir: string;
  readonly ignoreCase: boolean;
}
export type IgnoreBasisResult = IgnoreBasis | GitFailure;

/**
 * git's layout and settings of ignoring (rev-parse, config: two short gits) and the repository-wide
 * lists they name, read once: the index's rules start from it, and so do the answers NearIgnores
 * gives before the index is built. A failure (no git, no repository, too slow) says why.
 */
export async function readIgnoreBasis(worktree: string, log: Log, timeoutMs = GIT_TIMEOUT_MS): Promise<IgnoreBasisResult> {
  const git = new GitRunner(worktree, timeoutMs);
  const [layout, config] = await Promise.all([
    git.output(["rev-parse", "--show-toplevel", "--show-prefix", "--git-path", "info/exclude", "--git-common-dir"]),
    readIgnoreConfig(git),
  ]);
  if (!layout.ok) return layout;
  if (!config.ok) return config;
  const lines = layout.stdout.split("\n");
  if (lines.length !== 5) return { ok: false, code: null, why: "unexpected rev-parse output" };
  const [toplevel = "", prefix = "", excludePath = "", gitDir = ""] = lines;
  const userFile = config.excludesFile ?? defaultExcludesFile();
  const excludeText = readIgnoreFile(resolve(worktree, excludePath), true, log);
  // git reads a relative core.excludesFile from the repository's top (its cwd once set up), not from where it was asked.
  const userText = userFile === undefined ? undefined : readIgnoreFile(resolve(worktree, toplevel, userFile), true, log);
  const parse = (text: string | undefined, where: string): Ignore | undefined =>
    text === undefined ? undefined : parseIgnoreFile(text, config.ignoreCase, where, log);
  const exclude = parse(excludeText, excludePath);
  const userExcludes = parse(userText, userFile ?? "");
  return { ok: true, toplevel, prefix, exclude, userExcludes, gitDir: resolve(worktree, gitDir), ignoreCase: config.ignoreCase };
}

/** The .gitignore files of the directories above the worktree, up to the repository's top (they apply too). */
const aboveWorktree = (basis: IgnoreBasis): { dir: string; path: string }[] =>
  (basis.prefix === "" ? [] : directoriesAbove(basis.prefix)).map((dir) => ({ dir, path: join(basis.toplevel, dir, ".gitignore") }));

/**
 * Reads `files` (.gitignore files, each with its repository-relative directory) into `rules`; an
 * absent one adds nothing. In slices of FILL_SLICE_MS, each in a task of its own: a monorepo has thousands.
 */
async function addIgnoreFiles(rules: IgnoreRules, files: readonly { dir: string; path: string }[], ignoreCase: boolean, log: Log): Promise<void> {
  await inSlices(files, FILL_SLICE_MS, (file) => {
    addIgnoreFile(rules, file.dir, file.path, ignoreCase, log);
  });
}

function addIgnoreFile(rules: IgnoreRules, dir: string, path: string, ignoreCase: boolean, log: Log): void {
  const list = readIgnoreList(path, false, ignoreCase, log);
  if (list !== undefined) rules.add(dir, list);
}

/** The rule list of the ignore file at `path`, or undefined when it is absent or has no pattern (see readIgnoreFile). */
function readIgnoreList(path: string, followLinks: boolean, ignoreCase: boolean, log: Log): Ignore | undefined {
  const text = readIgnoreFile(path, followLinks, log);
  return text === undefined ? undefined : parseIgnoreFile(text, ignoreCase, path, log);
}

/**
 * The worktree-relative tops ("a/b/") of the checked-out submodules: git lists a submodule as one
 * entry (a gitlink) that the listing's pathspecs never match. Their paths are in .gitmodules at the
 * repository's top, asked of git only when that file exists. A path whose directory holds no `.git`
 * is no repository to git (nothing is checked out there), so a committed .gitmodules cannot take a
 * plain directory out of the outer repository's rules.
 */
async function checkedOutSubmodules(git: GitRunner, basis: IgnoreBasis, worktree: string, log: Log): Promise<string[]> {
  const file = join(basis.toplevel, ".gitmodules");
  if (lstatSync(file, { throwIfNoEntry: false })?.isFile() !== true) return [];
  const run = await git.output(["config", "-z", "--file", file, "--get-regexp", "^submodule\\..*\\.path$"]);
  if (!run.ok) {
    // 1: no submodule path in it. Otherwise it cannot be read: its submodules are judged as plain directories.
    if (run.code !== 1) log("warn", `worktree index: .gitmodules not read (${run.why}); its submodules are judged by this repository's rules`);
    return [];
  }
  const tops: string[] = [];
  // "key\npath\0" for each submodule; its path is relative to the repository's top.
  for (const entry of run.stdout.split("\0")) {
    const path = entry.slice(entry.indexOf("\n") + 1);
    if (!entry.includes("\n") || !path.startsWith(basis.prefix)) continue;
    const rel = normalizeRel(path.slice(basis.prefix.length))?.replace(/\/$/, "");
    if (rel !== undefined && rel !== "" && !outOfReach(rel) && holdsGit(join(worktree, rel))) tops.push(`${rel}/`);
  }
  return tops;
}

/**
 * What git ignores below a worktree before the index has listed it: the basis, the .gitignore files
 * above the worktree, and those of a directory and of every directory above it, read synchronously
 * the first time a directory below is asked about (one open and one read each). It answers as the
 * index does for the same files: a path deeper than MAX_DEPTH or too long is ignored, and below a
 * directory holding `.git` (a nested repository) that repository's own rules judge.
 */
export class NearIgnores {
  private readonly rules: IgnoreRules;

  constructor(worktree: string, basis: IgnoreBasis, log: Log) {
    this.rules = new IgnoreRules({ ...basis, worktree, reads: "everywhere", log });
    for (const { dir, path } of aboveWorktree(basis)) addIgnoreFile(this.rules, dir, path, basis.ignoreCase, log);
  }

  /** Whether git ignores directory `dir` (worktree-relative, ending in "/"). */
  isIgnored(dir: string): boolean {
    const path = normalizeRel(dir);
    if (path === undefined || path === "") return false;
    return outOfReach(path) || this.rules.isIgnored(path);
  }
}

/**
 * Whether `dir` is the top of another repository to git (its is_nonbare_repository_dir): its `.git` is
 * a git directory, or a file `gitdir: <path>` leading to one, or a file git cannot read. Any other
 * `.git` (an empty directory, a file that is no gitfile, a gitfile whose target went) makes a plain
 * directory, which git lists and judges by this repository's rules; so must the index. A `.git`
 * absent or unreadable counts as no.
 */
function holdsGit(dir: string): boolean {
  try {
    const dotGit = join(dir, ".git");
    const stat = statSync(dotGit, { throwIfNoEntry: false });
    if (stat === undefined) return false;
    if (stat.isDirectory()) return isGitDirectory(dotGit);
    if (!stat.isFile()) return false;
    // Read as git reads it: through a symlink (stat above followed it too).
    const text = readIgnoreFile(dotGit, true, () => {});
    if (text === undefined) return true; // git counts a gitfile it cannot open or read as a repository
    if (!text.startsWith("gitdir: ")) return false;
    const target = text.slice("gitdir: ".length).replace(/[\r\n]+$/, "");
    return target !== "" && isGitDirectory(resolve(dir, target));
  } catch {
    return false;
  }
}

/**
 * Git's is_git_directory: a HEAD that is a ref or an object name (validate_headref), and `objects`
 * and `refs` in the common directory (the one a `commondir` names, as a linked worktree's git
 * directory has, else this one).
 */
function isGitDirectory(path: string): boolean {
  if (!validHead(join(path, "HEAD"))) return false;
  const common = readIgnoreFile(join(path, "commondir"), true, () => {})?.replace(/[\r\n]+$/, "");
  const base = common === undefined || common === "" ? path : resolve(path, common);
  try {
    accessSync(join(base, "objects"), constants.X_OK);
    accessSync(join(base, "refs"), constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Git's validate_headref: HEAD is a symlink into `refs/`, or reads `ref: refs/...` or starts with an object name. */
function validHead(path: string): boolean {
  const stat = lstatSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return false;
  if (stat.isSymbolicLink()) return readlinkSync(path).startsWith("refs/");
  const text = readIgnoreFile(path, false, () => {})?.slice(0, 255);
  return text !== undefined && (/^ref:\s*refs\//.test(text) || /^[0-9a-fA-F]{40}/.test(text));
}

/** Git's default core.excludesFile: $XDG_CONFIG_HOME/git/ignore, or ~/.config/git/ignore. */
function defaultExcludesFile(): string | undefined {
  const xdg = process.env.XDG_CONFIG_HOME;
  if (xdg) return join(xdg, "git", "ignore");
  const home = process.env.HOME || homedir();
  return home ? join(home, ".config", "git", "ignore") : undefined;
}

/** What git's configuration says of ignoring. */
interface IgnoreConfig {
  readonly ok: true;
  /** core.excludesFile as git expands it; undefined when not set. */
  readonly excludesFile: string | undefined;
  readonly ignoreCase: boolean;
}

/**
 * core.excludesFile and core.ignoreCase in one git process (one spawn fewer on the start-up path).
 * `--type=path` expands `~/`, `~user/` and `%(prefix)/` in core.excludesFile as `git config --get
 * --type=path` does; core.ignoreCase comes out as written, and git's boolean words are read here. A
 * number, or a key written without a value (which `--type=path` refuses), is rare: then each key is
 * asked on its own, typed, and git's answers (or failures) are taken as they are.
 */
async function readIgnoreConfig(git: GitRunner): Promise<IgnoreConfig | GitFailure> {
  // `git config` exits with 1 when no key is set: that is an answer, not a failure.
  const both = await git.output(["config", "-z", "--type=path", "--get-regexp", "^core\\.(excludesfile|ignorecase)$"]);
  if (both.ok || both.code === 1) {
    // "key\nvalue\0" for each value; the last value of a key is the one git uses.
    const values = new Map<string, string>();
    for (const entry of both.ok ? both.stdout.split("\0") : []) {
      const newline = entry.indexOf("\n");
      if (newline !== -1) values.set(entry.slice(0, newline), entry.slice(newline + 1));
    }
    const written = values.get("core.ignorecase");
    const ignoreCase = written === undefined ? false : booleanWord(written);
    if (ignoreCase !== undefined) return { ok: true, excludesFile: values.get("core.excludesfile"), ignoreCase };
  }
  const [excludesFile, ignoreCase] = await Promise.all([
    git.output(["config", "--get", "--type=path", "core.excludesFile"]),
    git.output(["config", "--get", "--type=bool", "core.ignoreCase"]),
  ]);
  for (const run of [excludesFile, ignoreCase]) if (!run.ok && run.code !== 1) return run;
  return {
    ok: true,
    excludesFile: excludesFile.ok ? excludesFile.stdout.replace(/\n$/, "") : undefined,
    ignoreCase: ignoreCase.ok && ignoreCase.stdout.trim() === "true",
  };
}

/** git's boolean words (`git config --type=bool`, case-insensitive); undefined for anything else. */
function booleanWord(value: string): boolean | undefined {
  const word = value.toLowerCase();
  if (word === "true" || word === "yes" || word === "on") return true;
  if (word === "false" || word === "no" || word === "off" || word === "") return false;
  return undefined;
}

interface GitFailure {
  readonly ok: false;
  readonly code: number | null;
  readonly why: string;
}
type GitResult = { readonly ok: true; readonly stdout: string } | GitFailure;

/** A running git, as either spawn back-end gives it. */
interface GitProcess {
  readonly stdout: AsyncIterable<Uint8Array>;
  readonly stderr: AsyncIterable<Uint8Array>;
  /** The exit code, null when a signal ended git; rejects when git could not be started. */
  readonly exited: Promise<number | null>;
  kill(): void;
}

/**
 * Bun.spawn where it exists (OpenCode runs plugins on Bun): measured here, four gits through it cost
 * ~5 MiB and 7-10 ms each, through node:child_process ~30 MiB and 13-16 ms each. node:child_process
 * elsewhere: the `explain` CLI runs on Node.
 */
const launchGit: (args: readonly string[], cwd: string) => GitProcess | Promise<GitProcess> = typeof Bun === "undefined" ? launchWithNode : launchWithBun;

function launchWithBun(args: readonly string[], cwd: string): GitProcess {
  // `env`: by default Bun.spawn passes the environment the process started with, not process.env as it is now.
  const child = Bun.spawn(["git", ...args], { cwd, env: process.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  return { stdout: child.stdout, stderr: child.stderr, exited: child.exited.then(() => child.exitCode), kill: () => child.kill("SIGKILL") };
}

async function launchWithNode(args: readonly string[], cwd: string): Promise<GitProcess> {
  // Loaded on first use: Bun never needs it.
  const { spawn } = await import("node:child_process");
  const child = spawn("git", args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<number | null>((resolve, reject) => {
    // Never started (git absent): "error" is all there is to wait for. A started git ends with "close".
    child.on("error", (error) => {
      if (child.pid === undefined) reject(error);
    });
    child.once("close", (code) => resolve(code));
  });
  return { stdout: child.stdout, stderr: child.stderr, exited, kill: () => child.kill("SIGKILL") };
}

/**
 * Settings given ahead of every command, over the repository's own: a repository's .git/config (one
 * unpacked from an archive, say) may name a program as core.fsmonitor, and `git ls-files` runs it.
 * Empty is "off" both to git since 2.36 (a boolean) and to older gits (an empty hook path).
 */
const GIT_SAFETY = ["-c", "core.fsmonitor="] as const;

/** Runs git commands in the worktree, all under one deadline: past it, every one still running is killed. */
class GitRunner {
  private readonly deadline: AbortSignal;
  /**
   * Spawns start one per event-loop turn: a spawn holds the loop until git has started (Bun.spawn:
   * ~0.6 ms on an idle machine, 2 ms and more on a busy one), so four in one task stall it for up to
   * ~10 ms. setImmediate, unlike a timer, adds no delay.
   */
  private turn: Promise<void> = Promise.resolve();
  constructor(
    private readonly cwd: string,
    timeoutMs: number,
  ) {
    this.deadline = AbortSignal.timeout(timeoutMs);
  }

  /** A short command's whole output. */
  output(args: readonly string[]): Promise<GitResult> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    return this.run(args, (chunk) => {
      chunks.push(chunk);
      bytes += chunk.length;
      return bytes < MAX_PATH_BYTES;
    }).then((result) => (result.ok ? { ...result, stdout: Buffer.concat(chunks).toString("utf8") } : result));
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
   * Starts git (no shell) and feeds its stdout to `onData`, which answers whether to go on (`false`: the
   * output is refused, a failure; "stop": enough was read, a success). Either ends git at once.
   */
  private async run(args: readonly string[], onData: (chunk: Buffer) => boolean | "stop"): Promise<GitResult> {
    const turn = this.turn.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.turn = turn;
    await turn;
    if (this.deadline.aborted) return { ok: false, code: null, why: "timed out" };
    let child: GitProcess;
    try {
      child = await launchGit([...GIT_SAFETY, ...args], this.cwd);
    } catch (error) {
      return { ok: false, code: null, why: messageOf(error) };
    }
    const kill = (): void => child.kill();
    this.deadline.addEventListener("abort", kill);
    if (this.deadline.aborted) kill();
    try {
      const [verdict, stderr, code] = await Promise.all([feed(child.stdout, onData, kill), head(child.stderr, 1000), child.exited]);
      if (verdict === "stop" || (verdict && code === 0)) return { ok: true, stdout: "" };
      const why = this.deadline.aborted && code === null ? "timed out" : !verdict ? "output not understood" : `git ${args[0]} exited with ${code}: ${stderr.trim().split("\n")[0] ?? ""}`;
      return { ok: false, code, why };
    } catch (error) {
      kill(); // its output cannot be read: nothing more is wanted of it
      return { ok: false, code: null, why: messageOf(error) };
    } finally {
      this.deadline.removeEventListener("abort", kill);
    }
  }
}

/** Hands each chunk to `onData` until it answers other than `true`: then git is killed, its output unread. */
async function feed(stdout: AsyncIterable<Uint8Array>, onData: (chunk: Buffer) => boolean | "stop", kill: () => void): Promise<boolean | "stop"> {
  for await (const chunk of stdout) {
    const verdict = onData(asBuffer(chunk));
    if (verdict !== true) {
      kill();
      return verdict;
    }
  }
  return true;
}

/** The first `max` characters or so of a stream, read to its end: a git blocked on a full pipe never exits. */
async function head(stream: AsyncIterable<Uint8Array>, max: number): Promise<string> {
  let text = "";
  for await (const chunk of stream) if (text.length < max) text += asBuffer(chunk).toString("utf8");
  return text;
}

/** Bun's streams give Uint8Arrays, Node's give Buffers: the same bytes, without a copy. */
const asBuffer = (chunk: Uint8Array): Buffer => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);

/**
 * The walk: every directory from the worktree down that is not ignored, reading each .gitignore before
 * judging the entries beside it. Never follows a symlink (a symlinked directory is an entry, as git
 * lists it), never enters `.git` or a nested repository (git lists neither), never goes deeper than
 * MAX_DEPTH, and examines at most maxEntries entries.
 */
async function listWithWalk(worktree: string, classify: Classifier, budget: Budget, log: Log): Promise<Listing> {
  // Without git, its configuration is unknown: case follows the platform's usual filesystem.
  const ignoreCase = process.platform === "darwin" || process.platform === "win32";
  const gitDir = join(worktree, ".git");
  const exclude = readIgnoreList(join(gitDir, "info", "exclude"), false, ignoreCase, log);
  const rules = new IgnoreRules({ prefix: "", ignoreCase, exclude, userExcludes: undefined, worktree, gitDir, reads: "nested", log });
  const candidates: Candidate[] = [];
  let tooDeep = false;
  const visit = async (dir: string, depth: number): Promise<string[]> => {
    const entries = await readEntries(join(worktree, dir), budget);
    // A directory holding `.git` is another repository: git lists it as a whole, never its files; its own rules judge what is in it.
    if (dir !== "" && entries.some((entry) => entry.name === ".git") && holdsGit(join(worktree, dir))) {
      rules.addRepository(dir);
      return [];
    }
    if (entries.some((entry) => entry.name === ".gitignore" && entry.isFile())) addIgnoreFile(rules, dir, join(worktree, dir, ".gitignore"), ignoreCase, log);
    const subdirectories: string[] = [];
    for (const entry of entries) {
      if (entry.name === ".git" || entry.name.includes(UNDECODABLE)) continue;
      if (entry.isDirectory()) {
        const rel = `${dir}${entry.name}/`;
        if (rules.isIgnored(rel)) continue;
        if (depth + 1 > MAX_DEPTH) tooDeep = true;
        else subdirectories.push(rel);
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        const rel = dir + entry.name;
        const kind = classify(rel);
        // Only a name too long to open is out of reach here: the walk goes no deeper than MAX_DEPTH.
        if (kind !== undefined && !outOfReach(rel)) candidates.push({ rel, kind });
      }
    }
    return subdirectories;
  };
  await drain([{ dir: "", depth: 0 }], WALK_CONCURRENCY, async ({ dir, depth }) => (await visit(dir, depth)).map((sub) => ({ dir: sub, depth: depth + 1 })));
  // Cut short, the walk did not read every .gitignore: the others are read as their directories are asked about.
  if (budget.overflowed) rules.readEverywhere();
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
    // Loaded with the first walk (only where git cannot list): start-up needs none of node:fs/promises.
    const { opendir } = await fsPromises();
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
  /** The paths that may load, sorted by code unit: what is under a directory is one run of them. */
  private readonly listed: string[] = [];
  /** `files` as last handed out: a listing handed out does not change under its holder. */
  private handedOut: readonly string[] | undefined;
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
  async fill(candidates: readonly Candidate[]): Promise<void> {
    const kept: string[] = [];
    await inSlices(candidates, FILL_SLICE_MS, ({ rel, kind }) => {
      if (this.loads(rel, kind)) kept.push(rel);
    });
    kept.sort();
    for (const rel of kept) if (rel !== this.listed[this.listed.length - 1]) this.listed.push(rel);
    this.handedOut = undefined;
  }

  get files(): readonly string[] {
    // Typed readonly, not frozen (see FileStore.walkOf): 10,000 paths frozen held a 1 MB hash map.
    this.handedOut ??= this.listed.slice();
    return this.handedOut;
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
    return kind !== undefined && this.loads(path, kind);
  }

  /** mayLoad of a normalized path within reach whose kind is known (a listed candidate is all three). */
  private loads(path: string, kind: Kind): boolean {
    if (kind === "other") return !this.rules.isIgnored(path);
    return !this.rules.isIgnored(path.slice(0, path.lastIndexOf("/") + 1));
  }

  update(changedRel: string, now: PathKind): IndexChange {
    const path = normalizeRel(changedRel)?.replace(/\/$/, "");
    if (path === undefined || path === "") return "unchanged";
    if (path === ".gitignore" || path.endsWith("/.gitignore")) return "rebuild";
    // A file, or nothing, has nothing under it: what was listed there leaves (an `rm -rf` of 3,000
    // rule files, each a scan of the whole listing, took 106 ms; now a search each).
    let changed = now !== "directory" && this.removeUnder(path);
    const at = lowerBound(this.listed, path);
    const listed = this.listed[at] === path;
    if (now !== "file") {
      if (listed) this.listed.splice(at, 1);
      changed ||= listed;
    } else if (!listed && this.mayLoad(path)) {
      if (this.listed.length >= this.maxEntries) {
        if (!this.cut) this.log("warn", `worktree index: ${this.maxEntries} context files listed (maxEntries); ${path} and later ones are not`);
        this.cut = true;
      } else {
        this.listed.splice(at, 0, path);
        changed = true;
      }
    }
    if (!changed) return "unchanged";
    this.handedOut = undefined;
    return "changed";
  }

  /** Lets go of the listed paths under the directory `path`; whether there were any. */
  private removeUnder(path: string): boolean {
    const { from, to } = prefixRun(this.listed, `${path}/`);
    this.listed.splice(from, to - from);
    return to > from;
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
export function outOfReach(path: string): boolean {
  if (path.length > MAX_PATH_CHARS) return true;
  let slashes = 0;
  for (let at = path.indexOf("/"); at !== -1 && at < path.length - 1; at = path.indexOf("/", at + 1)) slashes++;
  return slashes + (path.endsWith("/") ? 1 : 0) > MAX_DEPTH;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
