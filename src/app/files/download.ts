/** Saves bytes or text as a file through a temporary object URL. */
export function download(name: string, data: BlobPart, type = 'application/octet-stream'): void {
  const url = URL.createObjectURL(new Blob([data], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.style.display = 'none';
  document.body.append(a);
  a.click();
  a.remove();
  // The download has started by now; give the browser a moment before freeing the bytes.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
