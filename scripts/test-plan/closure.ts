// The static import closure of a file inside one snapshot: every snapshot file it can load through a relative
// import, an `export … from`, or a dynamic `import("…")` with a literal specifier. The scan over-approximates
// on purpose (a specifier inside a comment or a string still counts): an extra input only costs a re-run, a
// missing one would reuse a stale result, and the tracer (trace-setup.ts) catches what no scan can see.
import { posix } from "node:path";

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)(["'])(\.{1,2}\/[^"'\n]*|\.{1,2})\1/g;

const PACKAGE_SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)(["'])([^."'\n/][^"'\n]*)\1/g;

/**
 * The packages a module's text imports by bare specifier (`zod`, `@xterm/headless`; `node:` built-ins left out), as
 * over-approximated as the relative scan: a package named only in a string still counts.
 */
export function packageImports(text: string): string[] {
  return [...text.matchAll(PACKAGE_SPECIFIER)]
    .map((match) => match[2] as string)
    .filter((specifier) => !specifier.startsWith("node:"))
    .map((specifier) =>
      specifier
        .split("/")
        .slice(0, specifier.startsWith("@") ? 2 : 1)
        .join("/"),
    );
}

/** The relative specifiers a module's text names, in order of appearance. */
export function relativeSpecifiers(text: string): string[] {
  return [...text.matchAll(SPECIFIER)].map((match) => match[2] as string);
}

/**
 * Where a specifier from `fromFile` (snapshot-relative, `/` separated) lands, as a snapshot-relative path, or
 * `undefined` when it leaves the snapshot. TypeScript's NodeNext resolution maps `./x.js` to `./x.ts`.
 */
export function resolveSpecifier(
  fromFile: string,
  specifier: string,
  exists: (path: string) => boolean,
): string | undefined {
  const target = posix.normalize(posix.join(posix.dirname(fromFile), specifier));
  if (target === ".." || target.startsWith("../")) return undefined;
  const candidates = [target];
  if (target.endsWith(".js")) candidates.unshift(`${target.slice(0, -3)}.ts`);
  else if (target.endsWith(".mjs")) candidates.unshift(`${target.slice(0, -4)}.mts`);
  else if (!/\.[cm]?[jt]s$|\.json$/.test(target)) candidates.push(`${target}.ts`, `${target}/index.ts`);
  return candidates.find(exists) ?? target;
}

/**
 * Every snapshot file reachable from `entries` by imports, the entries included. A specifier that resolves to
 * no file is kept as a path too, so a file appearing there later changes the closure.
 */
export function importClosure(entries: Iterable<string>, files: ReadonlyMap<string, string>): Set<string> {
  const exists = (path: string): boolean => files.has(path);
  const seen = new Set<string>();
  const queue = [...entries];
  for (let path = queue.pop(); path !== undefined; path = queue.pop()) {
    if (seen.has(path)) continue;
    seen.add(path);
    const text = files.get(path);
    if (text === undefined) continue;
    for (const specifier of relativeSpecifiers(text)) {
      const target = resolveSpecifier(path, specifier, exists);
      if (target !== undefined && !seen.has(target)) queue.push(target);
    }
  }
  return seen;
}
