//! DRS name translation (CMIP6, CMIP5, user rules files).
