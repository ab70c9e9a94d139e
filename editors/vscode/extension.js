// Starts `cliplint server` and lets vscode-languageclient do the rest: diagnostics, quick fixes,
// hover, notebook sync (the server declares it) and the `cliplint.verify` command, which the
// client registers from the server's capabilities (run from the palette, it verifies every open
// document).
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration('cliplint').get('path', 'cliplint');
  const server = { command, args: ['server'] };
  client = new LanguageClient('cliplint', 'cliplint', server, {
    documentSelector: [
      { scheme: 'file', language: 'python' },
      { scheme: 'untitled', language: 'python' },
      { scheme: 'file', language: 'yaml' },
      { scheme: 'file', language: 'json' },
      { scheme: 'file', language: 'toml' },
    ],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/pyproject.toml') },
  });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
