import { lstatSync, mkdirSync, realpathSync, rmdirSync } from "node:fs";
import { join, relative } from "node:path";

/**
 * Creates `folder` under `root` one level at a time, refusing any level that is a link or not a
 * folder. Used where the path was checked earlier: a link swapped in since then, such as a `.agent`
 * link to elsewhere, must not send a new folder, or the file written into it, out of `root`.
 */
export function makeRealFolders(root: string, folder: string): void {
  const parts = relative(root, folder).split(/[\\/]/).filter(Boolean);
  if (parts.includes("..")) throw new Error(`${folder} is not below ${root}`);
  let current = root;
  for (const part of parts) {
    current = join(current, part);
    let isFolder: boolean;
    try {
      const info = lstatSync(current);
      isFolder = info.isDirectory() && !info.isSymbolicLink();
    } catch {
      mkdirSync(current);
      // Its parent was checked a moment ago; if it became a link since, the new folder is elsewhere: undo it.
      const real = realpathSync.native(current);
      if (real !== current) {
        rmdirSync(real);
        throw new Error(`${current} moved while it was created`);
      }
      continue;
    }
    if (!isFolder) throw new Error(`${current} is not a plain folder`);
  }
}
