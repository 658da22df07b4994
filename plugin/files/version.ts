import type { FileVersion } from "./contained.ts";

/**
 * A version's text as it is kept: zstd-compressed from PACKED_FROM characters on. A long session
 * holds thousands of versions (the RSS benchmark's 2,000 directories: 2,102 files, about 10 MB of
 * text, over a third of the plugin's heap) and reads one's text rarely: to deliver, cut or rank it
 * (what is derived from it, units, counts and indexes, is kept by whoever derived it), and to
 * compare a host's copy with it. Level 1 keeps markdown in a third of its bytes or less, for about
 * 4 us a KB made and 2.5 us a KB read back (Bun 1.4.5), so nothing is kept decoded. On Node (the
 * `explain` CLI, a short run) and for text that does not shrink by a quarter, the text itself.
 */
type Packed = string | Uint8Array;

const PACKED_FROM = 1024;

function pack(text: string): Packed {
  if (text.length < PACKED_FROM || typeof Bun === "undefined") return text;
  const bytes = Buffer.from(text, "utf8");
  const packed = Bun.zstdCompressSync(bytes, { level: 1 });
  return packed.length <= bytes.length * 0.75 ? packed : text;
}

function unpack(packed: Packed): string {
  // Decoded from valid UTF-8 (a version's text is), the bytes give back the very same string.
  return typeof packed === "string" ? packed : Bun.zstdDecompressSync(packed).toString("utf8");
}

/** A line starting with `@`: a body without one imports nothing (see rules/imports.ts' importLines). */
export const AT_LINE = /^@/m;

const heldBytesOf = (packed: Packed): number => (typeof packed === "string" ? 2 * packed.length : packed.length);

/** What a version is besides its text. */
export type VersionFields = Omit<FileVersion, "raw" | "body">;

/**
 * A file version keeping its text packed: `raw` and `body` are decoded at each read. `body` is
 * `raw` past its frontmatter (an offset, nothing more kept) or, for a version the rules derived
 * (imports inlined), text of its own beside the source's `raw`, which it shares. Its other fields
 * are FileVersion's, copied in (declared by the interface of the same name).
 */
export interface StoredVersion extends VersionFields {}
export class StoredVersion implements FileVersion {
  readonly #raw: Packed;
  /** Where the body starts in `raw`, or the body itself. */
  readonly #body: number | Packed;
  /**
   * Whether a line of `body` starts with `@` (what an import needs, see rules/apply.ts' hasImports),
   * found while the text is at hand: the rules ask it of every version new to a session's hierarchy,
   * and decoding each of them for it took one task 70-100 ms in a session of 3,000 directories.
   */
  readonly #atLine: boolean;

  private constructor(fields: VersionFields, raw: Packed, body: number | Packed, atLine: boolean) {
    Object.assign(this, fields);
    this.#raw = raw;
    this.#body = body;
    this.#atLine = atLine;
    Object.freeze(this);
  }

  /** A version read from disk: `body` is `raw` past its frontmatter. Packed unless it is read for one use (`packed` false). */
  static read(fields: VersionFields, raw: string, body: string, packed = true): FileVersion {
    const keep = packed ? pack : (text: string) => text;
    return new StoredVersion(fields, keep(raw), raw.endsWith(body) ? raw.length - body.length : keep(body), AT_LINE.test(body));
  }

  /** `source` with the text the rules gave it (`body`), under `sha256`: its raw text shared. */
  static derived(source: FileVersion, body: string, sha256: string): FileVersion {
    const fields: VersionFields = { ...fieldsOf(source), sha256, source };
    return new StoredVersion(fields, source instanceof StoredVersion ? source.#raw : pack(source.raw), pack(body), AT_LINE.test(body));
  }

  /** Whether a line of its body starts with `@` (see #atLine). */
  get atLine(): boolean {
    return this.#atLine;
  }

  get raw(): string {
    return unpack(this.#raw);
  }

  get body(): string {
    const body = this.#body;
    if (typeof body !== "number") return unpack(body);
    const raw = this.raw;
    return body === 0 ? raw : raw.slice(body);
  }

  /** What its text takes in memory (a derived version's shared raw counted again: an estimate for a cache's bound). */
  get heldBytes(): number {
    return heldBytesOf(this.#raw) + (typeof this.#body === "number" ? 0 : heldBytesOf(this.#body));
  }
}

function fieldsOf({ path, dir, rel, frontmatter, root, sha256, size, truncated, mtimeMs }: FileVersion): VersionFields {
  return { path, dir, rel, frontmatter, root, sha256, size, truncated, mtimeMs };
}

/** What a version's text takes in memory (a version made elsewhere than here: its strings, up to 2 bytes a character). */
export const textBytes = (file: FileVersion): number => (file instanceof StoredVersion ? file.heldBytes : 2 * (file.raw.length + file.body.length));
