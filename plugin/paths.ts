import { lstatSync, realpathSync, statSync, type Stats } from "node:fs";
import { dirname, relative, sep } from "node:path";

/** `path` with every symlink resolved, or as given when it does not resolve. */
export function realPathOr(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}

/** Lexical containment: `path` is `root` or below it. Symlinks are settled on real paths, at read time. */
export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** Code points HFS+ ignores in a name: there `.g\u200cit` is `.git` (git's is_hfs_dotgit). */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/**
 * Whether a worktree-relative path goes through git's own directory as some filesystem reads the
 * name: in any case (macOS and Windows fold it), with the code points HFS+ ignores, and as NTFS
 * reads it (trailing dots and spaces dropped, `:stream` after it, the short name `git~1`). git
 * itself refuses to check out such names (core.protectHFS, core.protectNTFS), so no committed file
 * is refused for it.
 */
export function throughDotGit(rel: string): boolean {
  return rel.split("/").some((name) => {
    const folded = name.replace(HFS_IGNORED, "").toLowerCase();
    const ntfs = folded.replace(/:.*$/s, "").replace(/[. ]+$/, "");
    return folded === ".git" || ntfs === ".git" || ntfs === "git~1";
  });
}

/** `path` relative to `root` with "/" between names, as git, globs and `paths:` write them. */
export function relativePosix(root: string, path: string): string {
  return relative(root, path).split(sep).join("/");
}

/** What stat says of a path (identity, size, times), to tell a change; "-" when it is not there. */
export function statPrint(path: string): string {
  return printOf(statOrUndefined(path));
}

/**
 * statPrint of `path`, below the real directory `root`, or undefined when it resolves outside `root`
 * (a symlink out at its end or on its way, `..`): then nothing outside is stat'd. An lstat, and a
 * realpath only where it can tell something: a symlink at the end, resolved each time; a directory on
 * the way, resolved when the print is not `known` (new, or changed): a file that kept its identity,
 * size and times is the one found inside before.
 */
export function containedPrint(path: string, root: string, known: string | undefined): string | undefined {
  const info = statOrUndefined(path, false);
  if (info === undefined) return "-";
  if (info.isSymbolicLink()) {
    const real = realPathOr(path);
    return isInside(real, root) ? statPrint(real) : undefined;
  }
  const print = printOf(info);
  return print === known || isInside(realPathOr(dirname(path)), root) ? print : undefined;
}

/** statPrint's string of what stat said. */
export function printOf(info: Stats | undefined): string {
  return info === undefined ? "-" : `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
}

/** Whether stat of `path` is refused for want of permission (a directory on the way closed to this user): it may be there, hidden for now. */
export function hiddenByPermission(path: string): boolean {
  try {
    statSync(path);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EACCES";
  }
}

/**
 * stat of `path` (lstat when not `follow`: its last component not followed), undefined when there is
 * nothing there or it cannot be told (a directory on the way made a file: ENOTDIR; a symlink loop).
 */
export function statOrUndefined(path: string, follow = true): Stats | undefined {
  try {
    return (follow ? statSync : lstatSync)(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
