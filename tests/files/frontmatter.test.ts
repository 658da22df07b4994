import { describe, expect, test } from "bun:test";
import { parseFrontmatter } from "../../plugin/files/frontmatter.ts";

describe("frontmatter: a leading block is frontmatter only as a mapping with a known key", () => {
  test("a mapping with a known key is stripped and returned", () => {
    expect(parseFrontmatter("---\nroot: true\ndescription: API\n---\n# Body\n")).toEqual({ body: "# Body\n", frontmatter: { root: true, description: "API" } });
  });

  test("peers' keys count (globs, alwaysApply, applyTo, paths)", () => {
    expect(parseFrontmatter("---\nalwaysApply: true\n---\nx").frontmatter).toEqual({ alwaysApply: true });
    expect(parseFrontmatter("---\napplyTo: '**/*.ts'\n---\nx").body).toBe("x");
  });

  test("a prose block stays content, even one that parses as a mapping of unknown keys", () => {
    for (const text of ["---\nImportant: keep this\n---\nbody\n", "---\nsome prose, not YAML at all\n---\nbody", "---\n- a list\n---\nx", "---\n---\nx"]) {
      expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
    }
  });

  test("an unclosed block is content", () => {
    const text = "---\nroot: true\n# never closed\n";
    expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
  });

  test("---js is refused and never executed; the block is dropped with an error", () => {
    const flag = "__pc_frontmatter_ran";
    const parsed = parseFrontmatter(`---js\n(globalThis.${flag} = true, { root: true })\n---\nbody`);
    expect((globalThis as Record<string, unknown>)[flag]).toBeUndefined();
    expect(parsed.body).toBe("body");
    expect(parsed.frontmatter).toEqual({});
    expect(parsed.error).toContain("refused");
    for (const language of ["javascript", "coffee", "cson"]) expect(parseFrontmatter(`---${language}\nx\n---\nb`).error).toContain("refused");
  });

  test("invalid YAML whose lines name a known key: dropped from the body, fields unused, error reported", () => {
    const parsed = parseFrontmatter("---\nroot: true\ndescription: Rules: be nice\n---\n# Body\n");
    expect(parsed.body).toBe("# Body\n");
    expect(parsed.frontmatter).toEqual({});
    expect(parsed.error).toBeString();
  });

  test("invalid YAML without any known key is prose: kept whole, no error", () => {
    const text = "---\nnote: [unclosed\n---\nbody";
    expect(parseFrontmatter(text)).toEqual({ body: text, frontmatter: {} });
  });

  test("JSON blocks, CRLF line ends and a second document marker", () => {
    expect(parseFrontmatter('---json\n{"root": true}\n---\nj')).toEqual({ body: "j", frontmatter: { root: true } });
    expect(parseFrontmatter("---\r\nroot: true\r\n---\r\nbody")).toEqual({ body: "body", frontmatter: { root: true } });
    const twoDocs = "---\nroot: true\n---x\n---\nbody";
    expect(parseFrontmatter(twoDocs).body).toBe(twoDocs);
  });

  test("the frontmatter record is frozen", () => {
    expect(Object.isFrozen(parseFrontmatter("---\nroot: true\n---\n").frontmatter)).toBe(true);
  });
});
