#!/usr/bin/env bash
# Makes `pwsh` (PowerShell 7) available, installing it as a .NET global tool when it is missing.
# Used by .ci/run and by readers on Linux/macOS who have the .NET SDK; see README for other ways.
# Source it or run it; either way it prints where pwsh is, or fails loudly with the installer's error.
set -uo pipefail
PWSH_VERSION=7.6.9
tools="$HOME/.dotnet/tools"
case ":$PATH:" in *":$tools:"*) ;; *) export PATH="$PATH:$tools" ;; esac

if command -v pwsh >/dev/null 2>&1; then
  echo "== pwsh found: $(command -v pwsh) ($(pwsh -NoLogo -NoProfile -NonInteractive -Command '$PSVersionTable.PSVersion.ToString()'))"
  exit 0
fi
if ! command -v dotnet >/dev/null 2>&1; then
  echo "!! PowerShell 7 (pwsh) is missing and the .NET SDK is not installed, so it cannot be installed here." >&2
  echo "!! Install PowerShell 7 (see README) and run again." >&2
  exit 1
fi
echo "== installing PowerShell $PWSH_VERSION as a .NET global tool"
if ! out=$(dotnet tool install --global PowerShell --version "$PWSH_VERSION" 2>&1); then
  echo "!! PowerShell install FAILED: dotnet tool install --global PowerShell --version $PWSH_VERSION" >&2
  echo "$out" >&2
  exit 1
fi
echo "$out" | tail -n 1
echo "== pwsh installed: $tools/pwsh ($("$tools/pwsh" -NoLogo -NoProfile -NonInteractive -Command '$PSVersionTable.PSVersion.ToString()'))"
