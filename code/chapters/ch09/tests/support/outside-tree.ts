import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";

export interface TreeEntry {
  readonly path: string;
  readonly kind: string;
  readonly size: number;
  readonly mode: number;
  readonly nlink: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly content?: string;
}

/** Everything beside the workspace: names, kinds, sizes, modes, link counts, times, contents, link targets. */
export function outsideTree(root: string): { readonly listing: string[]; readonly entries: TreeEntry[] } {
  return treeOf(root, "ws");
}

/** Everything in `folder` as `outsideTree` sees it, leaving out the top-level entry `skip`; links are not followed. */
export function treeOf(folder: string, skip?: string): { readonly listing: string[]; readonly entries: TreeEntry[] } {
  const root = folder;
  const entries: TreeEntry[] = [];
  const walk = (folder: string, relative: string): void => {
    for (const name of readdirSync(folder).sort()) {
      if (relative === "" && name === skip) continue;
      const path = join(folder, name);
      const info = lstatSync(path);
      const kind = info.isSymbolicLink() ? "link" : info.isDirectory() ? "dir" : info.isFile() ? "file" : "other";
      const content = kind === "file" ? readFileSync(path, "base64") : kind === "link" ? readlinkSync(path) : undefined;
      entries.push({
        path: `${relative}${name}`,
        kind,
        size: info.size,
        mode: info.mode,
        nlink: info.nlink,
        mtimeMs: info.mtimeMs,
        ctimeMs: info.ctimeMs,
        ...(content === undefined ? {} : { content }),
      });
      if (kind === "dir") walk(path, `${relative}${name}/`);
    }
  };
  walk(root, "");
  return { listing: readdirSync(root).sort(), entries };
}
