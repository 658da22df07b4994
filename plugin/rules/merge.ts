import { dirname } from "node:path";
import { HEADING, ILLEGAL, rateLines } from "../block/doc.ts";
import { escapeInline, escapePath, sanitize } from "../block/escape.ts";

// ---------------------------------------------------------------------------------------------------
// Markdown lines, as the block sees them

/** One line of a markdown text. */
export interface MarkdownLine {
  /** Offsets of the line in the text; `end` is past its line break (or the end of the text). */
  readonly start: number;
  readonly end: number;
  /** The line starts inside a ``` or ~~~ fence: its content, or the line that closes it. */
  readonly fenced: boolean;
  /** 1-6 for an ATX heading outside fences, 0 for any other line. */
  readonly level: number;
}

export interface Outline {
  readonly lines: readonly MarkdownLine[];
  /** When the text ends inside a fence, the run that opened it (as written, e.g. "````"): what closes it. */
  readonly openFence: string | undefined;
}

/**
 * The lines of `text` with the block's own reading of fences and headings (plugin/block/doc.ts rates a
 * cut before a heading line outside a fence HEADING, and any cut inside a fence ILLEGAL), so merging,
 * imports and cuts never disagree on what a heading or a fence is. Offsets are the text's own (the
 * text is not made model text first). Linear in the text.
 */
export function outline(text: string): Outline {
  const lines: MarkdownLine[] = [];
  const endsFenced = rateLines(text, (start, end, rank) => lines.push({ start, end, fenced: rank === ILLEGAL, level: rank === HEADING ? hashes(text, start) : 0 }));
  return { lines, openFence: endsFenced ? fenceOpener(text, lines) : undefined };
}

function hashes(text: string, at: number): number {
  let count = 0;
  while (text.charCodeAt(at + count) === 0x23 /* # */) count++;
  return count;
}

/** The fence run of the last line that starts outside a fence: the one that opened the fence still open. */
function fenceOpener(text: string, lines: readonly MarkdownLine[]): string | undefined {
  const opener = lines.findLast((line) => !line.fenced);
  if (opener === undefined) return undefined;
  return /^[ \t]*(`{3,}|~{3,})/.exec(text.slice(opener.start, opener.end))?.[1];
}

/** `text` whole, ending with a line break and with any fence it leaves open closed, so it cannot swallow what follows it. */
export function sealed(text: string, openFence: string | undefined): string {
  const ended = text === "" || text.endsWith("\n") ? text : text + "\n";
  return openFence === undefined ? ended : `${ended}${openFence}\n`;
}

// ---------------------------------------------------------------------------------------------------
// Sections

/** A heading of level 2 or deeper and what it rules: up to the next heading of the same or a higher level. */
export interface Section {
  /** 2-6: level-1 headings are the document's title, never a section. */
  readonly level: number;
  /** What headings match on (see sectionName). */
  readonly name: string;
  /** The heading's text as written, for notes. */
  readonly title: string;
  readonly start: number;
  readonly end: number;
  /** The fence its text leaves open (only a section that runs to the end of a text ending in a fence). */
  readonly openFence: string | undefined;
}

export interface Sections {
  /** Only the FIRST section of each name: a later duplicate is plain text of its file, never matched. */
  readonly byName: ReadonlyMap<string, Section>;
}

/**
 * A heading's matching name: its text without the ATX markers (a closing `#` run after a blank too),
 * without invisible characters (the model never sees them, so two headings that read alike match),
 * blanks collapsed, NFC, lower case.
 */
export function sectionName(headingLine: string): string {
  return sanitize(headingTitle(headingLine)).replace(/\s+/g, " ").trim().normalize("NFC").toLowerCase();
}

function headingTitle(headingLine: string): string {
  const text = headingLine.replace(/^#+/, "").trim();
  const closing = /(^|[ \t])#+$/.exec(text);
  return closing === null ? text : text.slice(0, closing.index).trimEnd();
}

/** The sections of `text` (headings of level 2 or deeper outside fences), the first of each name. */
export function sectionsOf(text: string): Sections {
  const { lines, openFence } = outline(text);
  const byName = new Map<string, Section>();
  // Headings still open, outermost first: a heading closes every open one of its level or deeper.
  const open: { level: number; name: string; title: string; start: number }[] = [];
  const close = (end: number) => {
    const section = open.pop()!;
    if (section.name === "" || byName.has(section.name)) return;
    byName.set(section.name, { ...section, end, openFence: end === text.length ? openFence : undefined });
  };
  for (const line of lines) {
    if (line.level === 0) continue;
    while (open.length > 0 && open[open.length - 1]!.level >= line.level) close(line.start);
    // Level 1 is the document's title: it ends sections but is never one.
    if (line.level === 1) continue;
    const heading = text.slice(line.start, line.end);
    open.push({ level: line.level, name: sectionName(heading), title: headingTitle(heading), start: line.start });
  }
  while (open.length > 0) close(text.length);
  return { byName };
}

// ---------------------------------------------------------------------------------------------------
// Merging down the chains

export interface MergeFile {
  /** Identifies the file (its path): one key per file in all the chains. */
  readonly key: string;
  /** The same value exactly when the body is the same (a file version, or the text imports gave it): the memo's check. */
  readonly version: unknown;
  /** Worktree-relative path, for notes. */
  readonly rel: string;
  /** Read only where sections are merged (a version's text is decoded at each read: version.ts). */
  readonly body: string;
  /** The file's contract's `merge` (plugin/rules/contract.ts). */
  readonly merge: "append" | "override" | "sections";
}

export interface Merged {
  /** The bodies merging changed (sections moved in or out); a file that stays and is not here keeps its own. Iteration order means nothing. */
  readonly bodies: ReadonlyMap<string, string>;
  /** Files that every chain through them overrides: key → rels of the closest overriding file of each such chain (sorted, distinct). */
  readonly dropped: ReadonlyMap<string, readonly string[]>;
  /** Notes per key (only keys that have some), for the block and explain; plain text, escaped by whoever renders them. */
  readonly notes: ReadonlyMap<string, readonly string[]>;
}

/** One file as the chains place it. */
interface Placed {
  readonly file: MergeFile;
  /** Its index in the chains (the same in all of them: a chain through a file holds all its ancestors). */
  readonly depth: number;
  /** Its ancestors, root first. */
  readonly ancestors: readonly MergeFile[];
  /** The closest `override` file below it, in each chain through it (undefined when a chain has none). */
  readonly overriders: (MergeFile | undefined)[];
}

/**
 * Applies `merge` frontmatter down the chains (each root → leaf; a session has one per touched start
 * directory, sharing ancestors). Conservative: where the chains disagree nothing moves, and no text
 * leaves a file without a note saying where it went or what replaced it.
 *
 * - `override`: a file is dropped only when EVERY chain through it has an override file below it
 *   (whatever its include mode or priority); a file some other chain still needs stays, with a note
 *   naming what overrides it where. The override file's note lists the ancestors it replaces.
 * - `sections`: sections are headings of level 2 or deeper, matched by name (see sectionName); a file
 *   may have the same heading twice, and only the first of each name takes part. Ancestor A's section
 *   is replaced when, in every chain through A, the deepest `sections` file below A with a section of
 *   that name is the same file S (neither dropped). S's section (heading included) then takes the
 *   place of the HIGHEST such ancestor's section, after a note line saying where it came from; lower
 *   ancestors' sections of that name give way to a note line, and so does the section in S. Text
 *   before the first heading always stays. A replacement whose text overlaps another one already
 *   made (nested sections) is not made. S's note lists the ancestors each of its sections replaces,
 *   moved or not (its section wins in its directory either way).
 *
 * The result is a pure function of the chains as a set (their order changes no body, drop or note),
 * memoized: a repeated call on the same file versions returns the same object, and chains without
 * any override or sections file cost one pass.
 */
export function mergeChains(chains: readonly (readonly MergeFile[])[]): Merged {
  if (chains.every((chain) => chain.every((file) => file.merge === "append"))) return UNMERGED;
  const signature = signatureOf(chains);
  const known = memo.get(signature);
  if (known !== undefined && sameVersions(known.versions, chains)) {
    memo.delete(signature);
    memo.set(signature, known);
    return known.merged;
  }
  const merged = merge(chains);
  memo.set(signature, { merged, versions: versionsOf(chains) });
  if (memo.size > MEMO_SIZE) memo.delete(memo.keys().next().value!);
  return merged;
}

const UNMERGED: Merged = Object.freeze({ bodies: new Map(), dropped: new Map(), notes: new Map() });

function versionsOf(chains: readonly (readonly MergeFile[])[]): Map<string, unknown> {
  const versions = new Map<string, unknown>();
  for (const chain of chains) for (const file of chain) if (!versions.has(file.key)) versions.set(file.key, file.version);
  return versions;
}

/** The last results, by the chains' keys and modes (sessions alternate, so one entry would not do). */
const memo = new Map<string, { readonly merged: Merged; readonly versions: ReadonlyMap<string, unknown> }>();
const MEMO_SIZE = 64;

function signatureOf(chains: readonly (readonly MergeFile[])[]): string {
  return chains
    .map((chain) => chain.map((file) => `${file.key}\u0001${file.merge}`).join("\u0002"))
    .sort()
    .join("\u0003");
}

/** The same files at the same versions: a comparison per file, no text read. */
function sameVersions(versions: ReadonlyMap<string, unknown>, chains: readonly (readonly MergeFile[])[]): boolean {
  return chains.every((chain) => chain.every((file) => versions.get(file.key) === file.version));
}

function merge(given: readonly (readonly MergeFile[])[]): Merged {
  const chains = readingOnce(given);
  const placed = place(chains);
  const dropped = droppedFiles(placed);
  const notes = new Map<string, string[]>();
  noteOverrides(placed, dropped, notes);
  const edits = sectionEdits(chains, placed, dropped, notes);
  const bodies = new Map<string, string>();
  for (const [key, fileEdits] of edits) if (!dropped.has(key)) bodies.set(key, applyEdits(placed.get(key)!.file.body, fileEdits));
  return { bodies, dropped, notes };
}

/**
 * The chains with each file's body read at most once in this merge, and only if asked for: a file
 * version decodes its text at each read (version.ts), and a `sections` file is read for its outline,
 * for each section it gives and for its own edits.
 */
function readingOnce(chains: readonly (readonly MergeFile[])[]): MergeFile[][] {
  const copies = new Map<string, MergeFile>();
  const copyOf = (file: MergeFile): MergeFile => {
    let copy = copies.get(file.key);
    if (copy === undefined) {
      let body: string | undefined;
      copy = {
        key: file.key,
        version: file.version,
        rel: file.rel,
        merge: file.merge,
        get body() {
          return (body ??= file.body);
        },
      };
      copies.set(file.key, copy);
    }
    return copy;
  };
  return chains.map((chain) => chain.map(copyOf));
}

function place(chains: readonly (readonly MergeFile[])[]): Map<string, Placed> {
  const placed = new Map<string, Placed>();
  for (const chain of chains) {
    chain.forEach((file, depth) => {
      if (!placed.has(file.key)) placed.set(file.key, { file, depth, ancestors: chain.slice(0, depth), overriders: [] });
    });
    let overrider: MergeFile | undefined;
    for (let depth = chain.length - 1; depth >= 0; depth--) {
      const file = chain[depth]!;
      placed.get(file.key)!.overriders.push(overrider);
      if (file.merge === "override") overrider = file;
    }
  }
  return placed;
}

function droppedFiles(placed: ReadonlyMap<string, Placed>): Map<string, readonly string[]> {
  const dropped = new Map<string, readonly string[]>();
  for (const [key, { overriders }] of placed) {
    const rels = overriders.flatMap((file) => (file === undefined ? [] : [file.rel]));
    if (rels.length === overriders.length) dropped.set(key, distinctSorted(rels));
  }
  return dropped;
}

type Notes = Map<string, string[]>;

/** Each note is made once: per file and override, per section name, per replacement. */
function addNote(notes: Notes, key: string, note: string): void {
  const list = notes.get(key);
  if (list === undefined) notes.set(key, [note]);
  else list.push(note);
}

function noteOverrides(placed: ReadonlyMap<string, Placed>, dropped: ReadonlyMap<string, unknown>, notes: Notes): void {
  for (const [key, { file, ancestors, overriders }] of placed) {
    if (dropped.has(key)) continue;
    if (file.merge === "override" && ancestors.length > 0) {
      addNote(notes, key, `overrides ${ancestors.map((ancestor) => ancestor.rel).join(", ")} (merge: override): their text does not apply here`);
    }
    // Kept because another chain needs it: the model must know where it does not apply.
    const overriddenBy = distinctSorted(overriders.flatMap((overrider) => (overrider === undefined ? [] : [overrider.rel])));
    for (const rel of overriddenBy) addNote(notes, key, `overridden by ${rel} (merge: override) in ${dirname(rel)} and below`);
  }
}

function distinctSorted(values: readonly string[]): string[] {
  return [...new Set(values)].sort();
}

// ---------------------------------------------------------------------------------------------------
// Section replacement

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/** One section of one file. */
interface Located {
  readonly file: MergeFile;
  readonly section: Section;
}

/** A section of S that replaces the same-named section of one or more ancestors (highest first). */
interface Replacement {
  readonly source: Located;
  readonly targets: readonly Located[];
}

/** The replacements to make in each file's body, by key (sorted by offset); notes are added on the way. */
function sectionEdits(
  chains: readonly (readonly MergeFile[])[],
  placed: ReadonlyMap<string, Placed>,
  dropped: ReadonlyMap<string, unknown>,
  notes: Notes,
): Map<string, Edit[]> {
  const edits = new Map<string, Edit[]>();
  const sources = [...placed.values()].filter(({ file }) => file.merge === "sections" && !dropped.has(file.key));
  if (sources.length === 0) return edits;
  const sections = new SectionCache();
  for (const source of sources) noteWhatSectionsReplace(source, dropped, sections, notes);
  for (const replacement of replacements(unanimousWinners(chains, sections), placed, dropped, sections)) {
    const located = [...replacement.targets, replacement.source];
    if (located.every(({ file, section }) => isFree(edits.get(file.key), section))) applyReplacement(replacement, edits, notes);
  }
  return edits;
}

/** Outlines of the files met, by key: each body is read and parsed once per merge. */
class SectionCache {
  readonly #known = new Map<string, Sections>();

  of(file: MergeFile): Sections {
    let sections = this.#known.get(file.key);
    if (sections === undefined) {
      sections = sectionsOf(file.body);
      this.#known.set(file.key, sections);
    }
    return sections;
  }
}

/** In its own directory a `sections` file's section always wins, moved or not: say over which files. */
function noteWhatSectionsReplace(source: Placed, dropped: ReadonlyMap<string, unknown>, sections: SectionCache, notes: Notes): void {
  const kept = source.ancestors.filter((ancestor) => !dropped.has(ancestor.key));
  for (const [name, section] of sections.of(source.file).byName) {
    const replaced = kept.filter((ancestor) => sections.of(ancestor).byName.has(name));
    if (replaced.length === 0) continue;
    const rels = replaced.map((file) => file.rel).join(", ");
    addNote(notes, source.file.key, `section "${section.title}" replaces the one of ${rels} (merge: sections)`);
  }
}

interface Vote {
  winner: MergeFile | undefined;
  count: number;
}

/**
 * By ancestor key and section name: the file S whose section replaces the ancestor's in EVERY chain
 * through it (the deepest `sections` file below it with that name), when the chains agree.
 */
function unanimousWinners(chains: readonly (readonly MergeFile[])[], sections: SectionCache): Map<string, Map<string, MergeFile>> {
  const chainsThrough = new Map<string, number>();
  const votes = new Map<string, Map<string, Vote>>();
  for (const chain of chains) {
    // Walking up from the leaf, the first `sections` file met with a name is the deepest one.
    const deepest = new Map<string, MergeFile>();
    for (let depth = chain.length - 1; depth >= 0; depth--) {
      const file = chain[depth]!;
      chainsThrough.set(file.key, (chainsThrough.get(file.key) ?? 0) + 1);
      // A chain with no winner for a name casts no vote for it, so that name falls short of unanimity.
      if (deepest.size > 0) castVotes(votes, file, sections.of(file), deepest);
      if (file.merge === "sections") for (const name of sections.of(file).byName.keys()) if (!deepest.has(name)) deepest.set(name, file);
    }
  }
  const winners = new Map<string, Map<string, MergeFile>>();
  for (const [key, byName] of votes) {
    for (const [name, { winner, count }] of byName) {
      if (winner === undefined || count !== chainsThrough.get(key)) continue;
      let names = winners.get(key);
      if (names === undefined) winners.set(key, (names = new Map()));
      names.set(name, winner);
    }
  }
  return winners;
}

function castVotes(votes: Map<string, Map<string, Vote>>, file: MergeFile, own: Sections, deepest: ReadonlyMap<string, MergeFile>): void {
  let byName = votes.get(file.key);
  if (byName === undefined) votes.set(file.key, (byName = new Map()));
  const [fewer, more] = own.byName.size <= deepest.size ? [own.byName, deepest] : [deepest, own.byName];
  for (const name of fewer.keys()) {
    if (!more.has(name)) continue;
    const winner = deepest.get(name)!;
    const vote = byName.get(name);
    if (vote === undefined) byName.set(name, { winner, count: 1 });
    else if (vote.winner?.key === winner.key) vote.count++;
    // Two chains name different winners: nothing moves, whatever the other chains say.
    else vote.winner = undefined;
  }
}

/**
 * Each winning section of each source with the ancestors' sections it replaces, in an order that
 * depends on keys and offsets only (not on the chains' order): highest target first.
 */
function replacements(
  winners: ReadonlyMap<string, ReadonlyMap<string, MergeFile>>,
  placed: ReadonlyMap<string, Placed>,
  dropped: ReadonlyMap<string, unknown>,
  sections: SectionCache,
): Replacement[] {
  const bySource = new Map<string, { source: Located; targets: Located[] }>();
  for (const [key, names] of winners) {
    if (dropped.has(key)) continue;
    const target = placed.get(key)!.file;
    for (const [name, source] of names) {
      if (dropped.has(source.key)) continue;
      const id = `${source.key}\u0000${name}`;
      let replacement = bySource.get(id);
      if (replacement === undefined) {
        replacement = { source: { file: source, section: sections.of(source).byName.get(name)! }, targets: [] };
        bySource.set(id, replacement);
      }
      replacement.targets.push({ file: target, section: sections.of(target).byName.get(name)! });
    }
  }
  const depth = (located: Located) => placed.get(located.file.key)!.depth;
  const list = [...bySource.values()];
  for (const { targets } of list) targets.sort((a, b) => depth(a) - depth(b));
  return list.sort((a, b) => {
    const [x, y] = [a.targets[0]!, b.targets[0]!];
    return depth(x) - depth(y) || compare(x.file.key, y.file.key) || x.section.start - y.section.start;
  });
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Whether `section` overlaps no edit already planned (`edits` sorted by start, disjoint). */
function isFree(edits: readonly Edit[] | undefined, section: Section): boolean {
  if (edits === undefined) return true;
  const at = insertionPoint(edits, section.start);
  const before = edits[at - 1];
  const after = edits[at];
  return (before === undefined || before.end <= section.start) && (after === undefined || after.start >= section.end);
}

function insertionPoint(edits: readonly Edit[], start: number): number {
  let low = 0;
  let high = edits.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (edits[middle]!.start < start) low = middle + 1;
    else high = middle;
  }
  return low;
}

function addEdit(edits: Map<string, Edit[]>, key: string, edit: Edit): void {
  let list = edits.get(key);
  if (list === undefined) edits.set(key, (list = []));
  list.splice(insertionPoint(list, edit.start), 0, edit);
}

/**
 * The source's section takes the highest target's place after a note line; every other target's
 * section, and the source's own place, become a note line. Line breaks in paths cannot break a note.
 */
function applyReplacement({ source, targets }: Replacement, edits: Map<string, Edit[]>, notes: Notes): void {
  const [highest, ...lower] = targets as [Located, ...Located[]];
  const title = escapeInline(source.section.title);
  const from = escapePath(source.file.rel);
  const shownIn = escapePath(highest.file.rel);
  const moved = sealed(source.file.body.slice(source.section.start, source.section.end), source.section.openFence);
  addEdit(edits, highest.file.key, { ...span(highest.section), text: `[section "${title}" from ${from}, replacing this file's]\n${moved}` });
  const replacedBy = `replaced by the one of ${source.file.rel} (merge: sections)`;
  addNote(notes, highest.file.key, `section "${highest.section.title}" ${replacedBy}, shown in its place`);
  for (const target of lower) {
    const note = `[section "${escapeInline(target.section.title)}" of this file is replaced by the one of ${from}, shown in ${shownIn}]\n`;
    addEdit(edits, target.file.key, { ...span(target.section), text: note });
    addNote(notes, target.file.key, `section "${target.section.title}" ${replacedBy}, shown in ${highest.file.rel}`);
  }
  addEdit(edits, source.file.key, { ...span(source.section), text: `[section "${title}" of this file is shown in ${shownIn}, in place of that file's]\n` });
  addNote(notes, source.file.key, `section "${source.section.title}" moved to ${highest.file.rel}, in place of its section of that name`);
}

function span({ start, end }: Section): { start: number; end: number } {
  return { start, end };
}

/** `body` with `edits` (sorted, disjoint) made. */
function applyEdits(body: string, edits: readonly Edit[]): string {
  let out = "";
  let copied = 0;
  for (const edit of edits) {
    out += body.slice(copied, edit.start) + edit.text;
    copied = edit.end;
  }
  return out + body.slice(copied);
}
