import { join, relative } from "node:path";
import { folderAccess, FolderMovedError, type Folder, type FolderAccess } from "./folder-handles.js";

/**
 * Creates `folder` under `root` (a real path) one level at a time, each level opened or made inside the level
 * before it, never through a link (folder-handles.ts). Used where the path was checked earlier: a folder swapped
 * for a link since then must not send a new folder, or the file written into it, out of `root`.
 * A level that is a file throws an Error without a code. A level that is a link now (the check resolved every
 * link), that vanished, or that is found outside `root` throws FolderMovedError. Nothing is ever removed but a
 * folder this call made and found outside, and then only that very folder (Linux; elsewhere nothing).
 */
export function makeRealFolders(root: string, folder: string, access: FolderAccess = folderAccess()): void {
  const parts = relative(root, folder).split(/[\\/]/).filter(Boolean);
  if (parts.includes("..")) throw new Error(`${folder} is not below ${root}`);
  let current = access.openWorkspace(root);
  try {
    for (const part of parts) {
      const next = openOrMake(access, current, part);
      access.close(current);
      current = next;
    }
  } finally {
    access.close(current);
  }
}

function openOrMake(access: FolderAccess, parent: Folder, name: string): Folder {
  const path = join(parent.path, name);
  let found = access.openSubfolder(parent, name);
  let made = false;
  if (found === "missing") {
    made = access.makeSubfolder(parent, name);
    found = access.openSubfolder(parent, name);
    // What this call made is gone or was replaced before it could be opened.
    if (made && typeof found === "string") throw new FolderMovedError(`${path} vanished after it was made`);
  }
  if (found === "not-a-folder") throw new Error(`${path} is not a plain folder`);
  if (typeof found === "string") throw new FolderMovedError(`${path} is a link or vanished since it was checked`);
  if (!found.inside) {
    if (made) access.removeMade(parent, name, found);
    access.close(found);
    throw new FolderMovedError(`${path} is outside ${found.root} now`);
  }
  return found;
}
