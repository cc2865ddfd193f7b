// Placeholder: the web page (issue 17, item 6) replaces this file.
